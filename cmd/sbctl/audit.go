package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
)

func cmdAudit(e *env, args []string) error {
	if len(args) == 0 {
		return usageError("audit needs a subcommand: tail [-f], query, verify, export, pubkey")
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "tail":
		return auditTail(e, rest)
	case "query":
		return auditQuery(e, rest, false)
	case "export":
		return auditQuery(e, rest, true)
	case "verify":
		return auditVerify(e, rest)
	case "pubkey":
		var k api.AuditKey
		if err := e.client().do(e.ctx, http.MethodGet, "/v1/audit/pubkey", nil, &k); err != nil {
			return err
		}
		if e.json {
			return printJSON(e.stdout, k)
		}
		fmt.Fprintln(e.stdout, k.PublicKey)
		return nil
	default:
		return usageError(fmt.Sprintf("unknown audit subcommand %q", sub))
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

// streamRecords reads the daemon's NDJSON record stream.
func streamRecords(ctx context.Context, c *client, q url.Values, fn func(raw []byte, r *audit.Record) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandboxd/v1/audit/records?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb api.ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &eb) == nil {
			return &apiError{Status: resp.StatusCode, Detail: eb.Error}
		}
		return fmt.Errorf("daemon answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Seq == 0 {
			var eb api.ErrorBody
			if json.Unmarshal(sc.Bytes(), &eb) == nil && eb.Error.Class != "" {
				return &apiError{Status: 500, Detail: eb.Error}
			}
			return fmt.Errorf("bad record line: %q", sc.Bytes())
		}
		if err := fn(sc.Bytes(), &r); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return sc.Err()
}

func auditQuery(e *env, args []string, export bool) error {
	fs := newFlags(e, "audit query")
	var af auditFilters
	af.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if export || e.json {
		return streamRecords(e.ctx, e.client(), af.query(), func(raw []byte, _ *audit.Record) error {
			_, err := fmt.Fprintf(e.stdout, "%s\n", raw)
			return err
		})
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tKIND\tUSER\tSESSION\tTOOL\tDECISION\tRULE\tOUTCOME")
	err := streamRecords(e.ctx, e.client(), af.query(), func(_ []byte, r *audit.Record) error {
		printRecord(tw, r)
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func printRecord(w io.Writer, r *audit.Record) {
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
		outcome = fmt.Sprintf("exit=%d %dms", o.ExitCode, o.DurationMS)
		if o.Error != "" {
			outcome += " " + string(o.Error)
		}
	}
	fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, r.Time.Local().Format(time.DateTime),
		r.Kind, user, orDash(r.Session), orDash(r.Tool), decision, rule, outcome)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func auditTail(e *env, args []string) error {
	fs := newFlags(e, "audit tail")
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
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	return streamRecords(e.ctx, e.client(), q, func(raw []byte, r *audit.Record) error {
		if e.json {
			_, err := fmt.Fprintf(e.stdout, "%s\n", raw)
			return err
		}
		printRecord(tw, r)
		return tw.Flush()
	})
}

// auditVerify checks the log: offline on files or a directory (a copy works), or through
// the daemon. It exits 0 only if the log is intact.
func auditVerify(e *env, args []string) error {
	fs := newFlags(e, "audit verify")
	var files multi
	fs.Var(&files, "file", "log file to verify offline, in chain order (repeatable)")
	dir := fs.String("dir", "", "log directory to verify offline (a copy works)")
	pubPath := fs.String("pubkey", "", "public key file: also check checkpoint signatures and the head")
	head := fs.String("head", "", "head.json to check --file against")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rep *audit.VerifyReport
	var verr error
	switch {
	case len(files) > 0 || *dir != "":
		var pub ed25519.PublicKey
		if *pubPath != "" {
			var err error
			if pub, err = audit.LoadPublicKey(*pubPath); err != nil {
				return err
			}
		}
		if *dir != "" {
			rep, verr = audit.VerifyDir(*dir, pub)
		} else {
			rep, verr = audit.Verify(files, audit.VerifyOptions{PublicKey: pub, Head: *head})
		}
	default:
		var out api.AuditVerify
		if err := e.client().do(e.ctx, http.MethodGet, "/v1/audit/verify", nil, &out); err != nil {
			return err
		}
		rep = out.Report
		if !out.OK {
			verr = fmt.Errorf("%s", out.Error)
		}
	}
	if e.json {
		_ = printJSON(e.stdout, map[string]any{"ok": verr == nil, "report": rep, "error": errString(verr)})
	} else if verr == nil && rep != nil {
		signed := "chain only (no public key)"
		if rep.Signed {
			signed = "chain, checkpoints and head signatures"
		}
		fmt.Fprintf(e.stdout, "intact: %d records, seq %d..%d, %d files, %d checkpoints, %d recovered torn tails; checked %s\n",
			rep.Records, rep.FirstSeq, rep.LastSeq, len(rep.Files), rep.Checkpoints, rep.TornTails, signed)
	}
	if verr != nil {
		if !e.json {
			fmt.Fprintf(e.stderr, "NOT intact: %v\n", verr)
			if rep != nil && rep.Reason != "" {
				fmt.Fprintf(e.stderr, "first bad record: seq %d (%s line %d): %s\n", rep.BadSeq, rep.BadFile, rep.BadLine, rep.Reason)
			}
		}
		return &exitError{code: 1}
	}
	return nil
}

func errString(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}
