package offline

import (
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/replay"
)

// Audit runs the audit subcommands that need the audit, policy or replay packages.
func Audit(e *cli.Env, args []string) error {
	if len(args) > 0 && args[0] == "replay" {
		return Replay(e, args[1:])
	}
	return AuditVerify(e, args)
}

// replayRow is one changed call as `audit replay` prints it.
type replayRow struct {
	Seq     uint64         `json:"seq"`
	Time    time.Time      `json:"time"`
	User    string         `json:"user"`
	UID     uint32         `json:"uid"`
	Session string         `json:"session,omitempty"`
	Tool    string         `json:"tool"`
	Input   string         `json:"input"`
	Old     replay.Verdict `json:"old"`
	New     replay.Verdict `json:"new"`
	Change  string         `json:"change"`
	Loosens bool           `json:"loosens"`
}

// Replay runs `sbctl audit replay`: it decides recorded calls again under the current policy
// plus a candidate and prints the calls whose decision would change.
func Replay(e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "audit replay")
	var allow, deny, ask cli.Multi
	fs.Var(&allow, "allow", "candidate allow rule, added at the session source (repeatable)")
	fs.Var(&deny, "deny", "candidate deny rule (repeatable)")
	fs.Var(&ask, "ask", "candidate ask rule (repeatable)")
	policyDir := fs.String("policy-dir", "", "candidate admin policy directory (*.json settings and *.rego), replacing the daemon's")
	bundlePath := fs.String("bundle", "", "candidate OPA bundle (tar.gz)")
	dir := fs.String("dir", "", "replay a copy of the log in this directory, offline (its chain is verified first)")
	failOn := fs.String("fail-on", "", "exit 1 when the candidate would change something: loosen (newly allow, or allow unasked) or any")
	session := fs.String("session", "", "only this session")
	user := fs.String("user", "", "only this user name")
	tool := fs.String("tool", "", "only this tool")
	since := fs.String("since", "", "from this time (RFC 3339) or this long ago (e.g. 24h)")
	until := fs.String("until", "", "before this time (RFC 3339) or this long ago")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *failOn != "" && *failOn != "loosen" && *failOn != "any" {
		return cli.UsageError("--fail-on takes loosen or any")
	}
	if fs.NArg() > 0 {
		return cli.UsageError("audit replay takes no arguments: " + strings.Join(fs.Args(), " "))
	}
	var modules map[string]string
	var records iter.Seq2[*audit.Record, error]
	filter := audit.Filter{User: *user, Kinds: []audit.Kind{audit.KindCallEnd, audit.KindCallDecide}}
	for _, x := range []struct {
		v   string
		dst *time.Time
	}{{*since, &filter.Since}, {*until, &filter.Until}} {
		if x.v == "" {
			continue
		}
		t, err := protocol.ParseTime(x.v)
		if err != nil {
			return cli.UsageError(err.Error())
		}
		*x.dst = t
	}
	// Every call record is read and the window applied after: a rule set recorded before
	// --since still decides the calls inside it.
	window := filter
	filter.Since, filter.Until = time.Time{}, time.Time{}
	inWindow := func(r *audit.Record) bool {
		return (window.Since.IsZero() || !r.Time.Before(window.Since)) && (window.Until.IsZero() || r.Time.Before(window.Until))
	}
	if *dir != "" {
		if _, err := audit.VerifyDir(*dir, nil); err != nil {
			fmt.Fprintf(e.Stderr, "the log in %s is not intact; nothing replayed: %v\n", *dir, err)
			return &cli.ExitError{Code: 1}
		}
		var err error
		if modules, err = policy.EmbeddedModules(); err != nil {
			return err
		}
		records = audit.Query(*dir, filter)
	} else {
		var p protocol.Policy
		if err := e.Client().Do(e.Ctx, client.MethodGet, "/v1/policy", nil, &p); err != nil {
			return err
		}
		modules = p.Modules
		records = daemonRecords(e, filter)
	}
	var cand replay.Candidate
	cand.Allow, cand.Deny, cand.Ask = allow, deny, ask
	if *policyDir != "" {
		dm, err := policy.DirModules(e.Ctx, *policyDir)
		if err != nil {
			return err
		}
		modules = replaceModules(modules, func(name string) bool { return !policy.IsEmbedded(name) && !strings.Contains(name, ":") }, dm)
		rs, _, err := permission.Load(e.Ctx, permission.LoadOptions{PolicyDir: *policyDir, InsecureSkipOwnerCheck: true})
		if err != nil {
			return err
		}
		cand.Policy = rs
	}
	if *bundlePath != "" {
		f, err := os.Open(*bundlePath)
		if err != nil {
			return err
		}
		bm, full, err := policy.BundleModules(f)
		f.Close()
		if err != nil {
			return err
		}
		modules = replaceModules(modules, func(name string) bool {
			return strings.HasPrefix(name, "bundle") || (full && policy.IsEmbedded(name))
		}, bm)
	}
	r, err := replay.New(e.Ctx, modules, cand)
	if err != nil {
		return err
	}
	defer r.Close()
	keep := func(rec *audit.Record) bool {
		return (*session == "" || rec.Session == *session) && (*tool == "" || rec.Tool == *tool) && inWindow(rec)
	}
	var rows []replayRow
	loosened := false
	start := time.Now()
	st, err := r.Run(e.Ctx, records, keep, func(c *replay.Change) error {
		loosened = loosened || c.Loosens()
		row := replayRow{Seq: c.Seq, Time: c.Time, User: c.User, UID: c.UID, Session: c.Session, Tool: c.Tool,
			Input: cli.InputSummary(c.Tool, c.Input), Old: c.Old, New: c.New, Change: c.Direction(), Loosens: c.Loosens()}
		if row.User == "" {
			row.User = fmt.Sprint(c.UID)
		}
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return err
	}
	if e.JSON {
		if rows == nil {
			rows = []replayRow{}
		}
		if err := cli.PrintJSON(e.Stdout, rows); err != nil {
			return err
		}
		printReplaySummary(e.Stderr, st, r.PolicyDigest(), time.Since(start))
	} else {
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		if len(rows) > 0 {
			fmt.Fprintln(tw, "SEQ\tTIME\tUSER\tTOOL\tINPUT\tCHANGE\tRULE\tREASON")
		}
		for _, row := range rows {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Seq, row.Time.Local().Format(time.DateTime), cli.Visible(row.User), cli.Visible(row.Tool),
				cli.Clip(row.Input, 60), row.Change, cli.Visible(dash(row.New.Rule)), cli.Clip(row.New.Reason, 80))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		printReplaySummary(e.Stdout, st, r.PolicyDigest(), time.Since(start))
	}
	if (*failOn == "any" && st.Changed > 0) || (*failOn == "loosen" && loosened) {
		return &cli.ExitError{Code: 1}
	}
	return nil
}

func printReplaySummary(w io.Writer, st replay.Stats, digest string, took time.Duration) {
	dirs := slices.Sorted(maps.Keys(st.Directions))
	var parts []string
	for _, d := range dirs {
		parts = append(parts, fmt.Sprintf("%s %d", d, st.Directions[d]))
	}
	changes := "no changes"
	if st.Changed > 0 {
		changes = fmt.Sprintf("%d changes (%s)", st.Changed, strings.Join(parts, ", "))
	}
	fmt.Fprintf(w, "replayed %d calls under policy %.12s in %s: %s\n", st.Replayed, digest, took.Round(time.Millisecond), changes)
	for _, why := range slices.Sorted(maps.Keys(st.Skipped)) {
		fmt.Fprintf(w, "not replayed: %d calls: %s\n", st.Skipped[why], why)
	}
	if n := len(st.Policies); n > 1 || (n == 1 && st.Policies[digest] == 0) {
		fmt.Fprintf(w, "note: the calls were decided under %d other policy versions; changes include what differs between those and this one\n", n-min(st.Policies[digest], 1))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// replaceModules drops the modules drop selects and adds add.
func replaceModules(mods map[string]string, drop func(string) bool, add map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range mods {
		if !drop(k) {
			out[k] = v
		}
	}
	maps.Copy(out, add)
	return out
}

// daemonRecords streams the call records the daemon shows this caller. Session and tool
// are filtered here, not by the daemon, so the records that carry rule sets are all seen.
func daemonRecords(e *cli.Env, f audit.Filter) iter.Seq2[*audit.Record, error] {
	q := map[string][]string{"kind": {"call.end,call.decide"}}
	if f.User != "" {
		q["user"] = []string{f.User}
	}
	if !f.Since.IsZero() {
		q["since"] = []string{f.Since.Format(time.RFC3339Nano)}
	}
	if !f.Until.IsZero() {
		q["until"] = []string{f.Until.Format(time.RFC3339Nano)}
	}
	return func(yield func(*audit.Record, error) bool) {
		stop := fmt.Errorf("stop")
		err := e.Client().Records(e.Ctx, q, func(raw []byte, _ *protocol.Record) error {
			var rec audit.Record
			if err := json.Unmarshal(raw, &rec); err != nil {
				return fmt.Errorf("decode record: %w", err)
			}
			if !yield(&rec, nil) {
				return stop
			}
			return nil
		})
		if err != nil && err != stop {
			yield(nil, err)
		}
	}
}
