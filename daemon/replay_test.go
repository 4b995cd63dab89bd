package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/replay"
)

// replayLog replays a daemon's log under modules plus cand and returns the changes by seq.
func replayLog(t *testing.T, dir string, modules map[string]string, cand replay.Candidate) ([]*replay.Change, replay.Stats) {
	t.Helper()
	if modules == nil {
		var err error
		if modules, err = policy.EmbeddedModules(); err != nil {
			t.Fatal(err)
		}
	}
	r, err := replay.New(context.Background(), modules, cand)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var changes []*replay.Change
	st, err := r.Run(context.Background(), audit.Query(dir, audit.Filter{}), nil, func(c *replay.Change) error {
		changes = append(changes, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return changes, st
}

// A recorded session replayed: under an unchanged policy nothing changes; a new deny lists
// exactly the calls it would have stopped; a new allow and a custom Rego module list theirs.
func TestReplayRecordedSession(t *testing.T) {
	td := startDaemon(t, "")
	dir := t.TempDir()
	bypass := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	def := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"rules":{"deny":["Read(secret.txt)"]}}`, dir))
	type call struct{ id, cmd string }
	calls := []call{
		{bypass.ID, "git status"}, {bypass.ID, "git push origin main"}, {bypass.ID, "ls -la"},
		{bypass.ID, "git push --force origin HEAD"}, {bypass.ID, "curl -s https://example.com"},
		{def.ID, "npm test"}, {def.ID, "git log"}, {def.ID, "git push"},
	}
	behavior := map[string]string{}
	for _, c := range calls {
		behavior[c.id+c.cmd] = decide(t, td, c.id, "Bash", fmt.Sprintf(`{"command":%q}`, c.cmd))
	}
	if b := behavior[def.ID+"npm test"]; b != "ask" {
		t.Fatalf("npm test in default mode: %s, want ask", b)
	}
	td.stop()
	logDir := filepath.Join(td.state, "audit")
	seqOf := map[string]uint64{}
	for _, r := range auditRecords(t, td) {
		if r.Kind == audit.KindCallDecide {
			if _, ok := r.Detail[replay.DetailFacts]; !ok {
				t.Errorf("call.decide %d carries no facts: %v", r.Seq, r.Detail)
			}
			seqOf[r.Session+string(r.Input)] = r.Seq
		}
	}
	seq := func(c call) uint64 { return seqOf[c.id+fmt.Sprintf(`{"command":%q}`, c.cmd)] }

	changes, st := replayLog(t, logDir, nil, replay.Candidate{})
	if len(changes) != 0 || st.Replayed != len(calls) {
		t.Fatalf("unchanged policy: %d changes (%v), %d replayed of %d; skipped %v", len(changes), changes, st.Replayed, len(calls), st.Skipped)
	}

	changes, st = replayLog(t, logDir, nil, replay.Candidate{Deny: []string{"Bash(git push:*)"}})
	var got, want []uint64
	for _, c := range changes {
		got = append(got, c.Seq)
		if c.New.Behavior != "deny" || c.New.Rule != "Bash(git push:*)" || c.Loosens() {
			t.Errorf("change %d: %+v", c.Seq, c)
		}
	}
	for _, c := range []call{calls[1], calls[3]} {
		want = append(want, seq(c))
	}
	// git push in default mode was already an ask: ask→deny is a change too.
	want = append(want, seq(calls[7]))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("deny git push: changed seqs %v, want %v", got, want)
	}
	if st.Directions["allow→deny"] != 2 || st.Directions["ask→deny"] != 1 {
		t.Errorf("directions: %v", st.Directions)
	}

	changes, _ = replayLog(t, logDir, nil, replay.Candidate{Allow: []string{"Bash(npm test)"}})
	if len(changes) != 1 || changes[0].Seq != seq(calls[5]) || changes[0].Direction() != "ask→allow" || !changes[0].Loosens() {
		t.Fatalf("allow npm test: %+v", changes)
	}

	mods, err := policy.EmbeddedModules()
	if err != nil {
		t.Fatal(err)
	}
	mods["custom/nocurl.rego"] = "package sandboxd.custom\n\nimport rego.v1\n\n" +
		"deny contains \"no curl on this fleet\" if {\n\tinput.tool == \"Bash\"\n\tstartswith(input.input.command, \"curl \")\n}\n"
	changes, _ = replayLog(t, logDir, mods, replay.Candidate{})
	if len(changes) != 1 || changes[0].Seq != seq(calls[4]) || changes[0].New.Behavior != "deny" {
		t.Fatalf("custom rego: %+v", changes)
	}
}
