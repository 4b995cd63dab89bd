package cli

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

func cmdAudit(e *Env, args []string) error {
	sub, rest, err := subcommand(e, args, "usage: sbctl audit tail [-f] | query | stats | replay | verify | export | pubkey   (sbctl audit SUB -h: its flags)")
	if err != nil {
		return err
	}
	switch sub {
	case "tail":
		return auditTail(e, rest)
	case "query":
		return auditQuery(e, rest, false)
	case "export":
		return auditQuery(e, rest, true)
	case "stats":
		return auditStats(e, rest)
	case "replay":
		// Deciding calls again needs the policy engine, which only sbctl-full links.
		return e.Heavy(e, "audit", args)
	case "verify":
		return auditVerify(e, rest)
	case "pubkey":
		if rest, err := positionalOnly(e, "audit pubkey", rest); err != nil {
			return err
		} else if len(rest) > 0 {
			return UsageError("usage: sbctl audit pubkey")
		}
		var k protocol.AuditKey
		if err := e.Client().Do(e.Ctx, client.MethodGet, "/v1/audit/pubkey", nil, &k); err != nil {
			return err
		}
		if e.JSON {
			return PrintJSON(e.Stdout, k)
		}
		fmt.Fprintln(e.Stdout, k.PublicKey)
		return nil
	default:
		return UsageError(fmt.Sprintf("unknown audit subcommand %q", sub))
	}
}

// auditFilters are the query flags shared by query, export and tail.
type auditFilters struct {
	session, user, tool, behavior, since, until, kind string
}

func (af *auditFilters) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&af.session, "session", "", "only this session")
	fs.StringVar(&af.user, "user", "", "only this user name")
	fs.StringVar(&af.tool, "tool", "", "only this tool")
	fs.StringVar(&af.behavior, "behavior", "", "only decisions with this behavior: allow, deny, ask")
	fs.StringVar(&af.since, "since", "", "from this time (RFC 3339) or this long ago (e.g. 1h)")
	fs.StringVar(&af.until, "until", "", "before this time (RFC 3339) or this long ago")
	fs.StringVar(&af.kind, "kind", "", "record kinds, comma-separated (e.g. call.end,session.create)")
}

func (af *auditFilters) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"session": af.session, "user": af.user, "tool": af.tool,
		"behavior": af.behavior, "since": af.since, "until": af.until, "kind": af.kind} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func auditQuery(e *Env, args []string, export bool) error {
	name := "audit query"
	if export {
		name = "audit export"
	}
	fs := NewFlags(e, name)
	var af auditFilters
	af.register(fs)
	grep := fs.String("grep", "", "only records whose input matches this regular expression")
	format := "jsonl"
	if export {
		fs.StringVar(&format, "format", "jsonl", "jsonl (the records as stored, hashes intact) or ocsf (OCSF 1.3 events, one per line)")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var re *regexp.Regexp
	if *grep != "" {
		var err error
		if re, err = regexp.Compile(*grep); err != nil {
			return UsageError(fmt.Sprintf("--grep: %v", err))
		}
	}
	match := func(r *protocol.Record) bool {
		return re == nil || re.Match(r.Input) || re.MatchString(r.Detail["decided_input"]) || re.MatchString(InputSummary(r.Tool, r.Input))
	}
	q := af.query()
	switch format {
	case "jsonl":
	case "ocsf":
		q.Set("format", "ocsf")
	default:
		return UsageError(fmt.Sprintf("--format %q: want jsonl or ocsf", format))
	}
	if export || e.JSON {
		if format == "ocsf" {
			// OCSF events carry the record's input under unmapped; --grep matches it there.
			return e.Client().RawLines(e.Ctx, "/v1/audit/records?"+q.Encode(), func(raw []byte) error {
				if re != nil && !re.Match(raw) {
					return nil
				}
				_, err := fmt.Fprintf(e.Stdout, "%s\n", raw)
				return err
			})
		}
		return e.Client().Records(e.Ctx, q, func(raw []byte, r *protocol.Record) error {
			if !match(r) {
				return nil
			}
			_, err := fmt.Fprintf(e.Stdout, "%s\n", raw)
			return err
		})
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tUSER\tSESSION\tTOOL\tINPUT\tDECISION\tRULE\tOUTCOME")
	err := e.Client().Records(e.Ctx, q, func(_ []byte, r *protocol.Record) error {
		if match(r) {
			printRecord(tw, r)
		}
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func printRecord(w io.Writer, r *protocol.Record) {
	user, decision, rule, outcome := "-", "-", "-", "-"
	if r.Caller != nil {
		user = r.Caller.User
		if user == "" {
			user = fmt.Sprint(r.Caller.UID)
		}
	}
	if r.Decision != nil {
		decision = r.Decision.Behavior
		if r.Decision.Rule != "" {
			rule = r.Decision.Rule + " (" + r.Decision.Source + ")"
		} else if r.Decision.Source != "" {
			rule = r.Decision.Source
		}
	}
	if o := r.Outcome; o != nil {
		// Every call's last record has an outcome, with exit code 0 where nothing ran (a
		// denial, an ask, a decision only): "deny ... exit=0" read as though it ran and passed.
		ran := r.Kind != "call.decide" && r.Decision != nil && r.Decision.Behavior == protocol.Allow
		switch {
		case ran && o.TaskID != "" && o.Timeout:
			outcome = fmt.Sprintf("timed out, went on as task %s %dms", Visible(o.TaskID), o.DurationMS)
		case ran && o.TaskID != "":
			outcome = fmt.Sprintf("started task %s %dms", Visible(o.TaskID), o.DurationMS)
		case ran:
			outcome = fmt.Sprintf("exit=%d %dms", o.ExitCode, o.DurationMS)
		default:
			outcome = fmt.Sprintf("not run %dms", o.DurationMS)
		}
		if o.Error != "" {
			outcome += " " + o.Error
		}
	}
	input := InputSummary(r.Tool, r.Input)
	switch r.Kind {
	case "net.connect":
		input, decision, rule, outcome = netConnectColumns(r.Detail)
	case "daemon.start":
		if r.Detail["previous_stop"] == "unclean" {
			// What a reader of the log must not miss: calls whose end was never recorded.
			outcome = "previous daemon stopped uncleanly; unfinished calls: " + orDash(r.Detail["unfinished_calls"])
		}
	case "audit.cut_back":
		// Evidence of records lost while the daemon was down: a listing must not show it blank.
		outcome = fmt.Sprintf("records lost while the daemon was down (%s): signed head seq %s, log ended at seq %s",
			r.Detail["reason"], orDash(r.Detail["head_seq"]), r.Detail["last_seq"])
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Local().Format(time.DateTime),
		Visible(r.Kind), Visible(user), orDash(Visible(r.Session)), orDash(Visible(r.Tool)), orDash(Clip(input, 60)),
		Visible(decision), Visible(rule), Visible(outcome))
}

// netConnectColumns shows a proxy decision in the call columns: what was asked for (a
// request's method and URL, or the tunnel's host and port), allow or deny, the deciding rule,
// and the reason with the address it resolved to.
func netConnectColumns(d map[string]string) (input, decision, rule, outcome string) {
	// As net.JoinHostPort, which this package must not link: net brings cgo, and the
	// client's start with it.
	hostport := d["host"] + ":" + d["port"]
	if strings.Contains(d["host"], ":") {
		hostport = "[" + d["host"] + "]:" + d["port"]
	}
	switch {
	case d["method"] != "":
		input = d["method"] + " " + hostport + d["path"]
	default:
		input = d["kind"] + " " + hostport
	}
	if d["via"] != "" {
		input += " (" + d["via"] + ")"
	}
	decision = "deny"
	if d["allowed"] == "true" {
		decision = "allow"
	}
	rule, outcome = orDash(d["rule"]), orDash(d["reason"])
	if d["ip"] != "" {
		outcome = d["ip"] + ": " + outcome
	}
	return input, decision, rule, outcome
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func auditTail(e *Env, args []string) error {
	fs := NewFlags(e, "audit tail")
	var af auditFilters
	af.register(fs)
	follow := fs.Bool("f", false, "keep printing new records")
	n := fs.Int("n", 20, "how many records to show first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	q := af.query()
	q.Set("tail", fmt.Sprint(*n))
	if *follow {
		q.Set("follow", "1")
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	if !e.JSON {
		fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tUSER\tSESSION\tTOOL\tINPUT\tDECISION\tRULE\tOUTCOME")
	}
	return e.Client().Records(e.Ctx, q, func(raw []byte, r *protocol.Record) error {
		if e.JSON {
			_, err := fmt.Fprintf(e.Stdout, "%s\n", raw)
			return err
		}
		printRecord(tw, r)
		return tw.Flush()
	})
}

// auditVerify checks the log through the daemon (admins), with its public key; with --file or
// --dir it verifies a copy offline, which needs the audit package: sbctl-full does that, with
// --pubkey or, saying so, --chain-only. It exits 0 only if the log is intact.
func auditVerify(e *Env, args []string) error {
	for _, a := range args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && (name == "file" || name == "dir") {
			return e.Heavy(e, "audit", append([]string{"verify"}, args...))
		}
	}
	fs := NewFlags(e, "audit verify")
	fs.Var(new(Multi), "file", "log file to verify offline, in chain order (repeatable)")
	fs.String("dir", "", "log directory to verify offline (a copy works)")
	fs.String("pubkey", "", "public key file: also check checkpoint signatures and the head (with --dir or --file)")
	fs.Var(new(Multi), "old-pubkey", "public key file of a signing key the log's audit.key_replaced replaced (with --dir or --file; repeatable)")
	fs.String("head", "", "head.json to check --file against")
	fs.Bool("chain-only", false, "with --dir or --file and no --pubkey: check the hash chain alone, no signature")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var out protocol.AuditVerify
	if err := e.Client().Do(e.Ctx, client.MethodGet, "/v1/audit/verify", nil, &out); err != nil {
		return err
	}
	var verr error
	if !out.OK {
		verr = fmt.Errorf("%s", out.Error)
	}
	return PrintVerify(e, out.Report, verr)
}

// PrintVerify prints a verification's report and exits 1 unless the log is intact.
func PrintVerify(e *Env, rep *protocol.VerifyReport, verr error) error {
	if e.JSON {
		_ = PrintJSON(e.Stdout, map[string]any{"ok": verr == nil, "report": rep, "error": errString(verr)})
	} else if verr == nil && rep != nil {
		verdict, checked := "intact", "checked chain, checkpoints and head signatures"
		if !rep.Signed {
			// --chain-only: whoever can edit the files can recompute the chain, so this is
			// not called intact, and says what it left out.
			verdict, checked = "chain intact", "signatures NOT checked (--chain-only): a log re-hashed after an edit passes this"
		}
		fmt.Fprintf(e.Stdout, "%s: %d records, seq %d..%d, %d files, %d checkpoints, %d recovered torn tails; %s\n",
			verdict, rep.Records, rep.FirstSeq, rep.LastSeq, len(rep.Files), rep.Checkpoints, rep.TornTails, checked)
		if rep.Pruned {
			// Retention removes the oldest files, and so can anyone with the files: the chain
			// cannot tell which, so the reader is told where the history begins.
			fmt.Fprintf(e.Stdout, "starts at seq %d: the records before it are not in these files (removed by retention, or by whoever removed the files)\n", rep.FirstSeq)
		}
		if rep.KeyReplacements > 0 {
			checked := "signatures not checked"
			if rep.Signed {
				checked = "every checkpoint before them was checked with a key given"
			}
			fmt.Fprintf(e.Stdout, "signing key replaced: %d audit.key_replaced records; %s\n", rep.KeyReplacements, checked)
		}
		if rep.Signed && rep.Unsigned > 0 {
			fmt.Fprintf(e.Stdout, "unsigned: the last %d records (seq %d..%d) follow the last signature: only the chain holds them, and anyone with the files can append such records\n",
				rep.Unsigned, rep.LastSeq-rep.Unsigned+1, rep.LastSeq)
		}
	}
	if verr != nil {
		if !e.JSON {
			head := "NOT intact"
			if rep != nil && rep.Reason == "" && rep.UncheckedCheckpoints > 0 {
				// No record is bad: what a replaced key signed could not be checked.
				head = "NOT fully verified"
			}
			fmt.Fprintf(e.Stderr, "%s: %v\n", head, verr)
			if rep != nil && rep.Reason != "" {
				fmt.Fprintf(e.Stderr, "first bad record: seq %d (%s line %d): %s\n", rep.BadSeq, rep.BadFile, rep.BadLine, rep.Reason)
			}
			if rep != nil && rep.CutBacks+rep.KeyReplacements > 0 {
				// The error names one finding; a log can hold both kinds, more than once.
				fmt.Fprintf(e.Stderr, "in the records read: %d audit.cut_back, %d audit.key_replaced (%d checkpoints of a replaced key not checked)\n",
					rep.CutBacks, rep.KeyReplacements, rep.UncheckedCheckpoints)
			}
		}
		return &ExitError{Code: 1}
	}
	return nil
}

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}
