package daemon

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
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

// The audit commands a security team runs, end to end through sbctl: replay (live, --json,
// --fail-on, offline on a copy, refused on a tampered copy and to a non-admin), query with the
// input and --grep, stats, and the OCSF export.
func TestAuditCommandsThroughSbctl(t *testing.T) {
	td := startDaemon(t, "")
	bin := buildSbctl(t)
	dir := t.TempDir()
	bypass := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	def := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"rules":{"deny":["Read(secret.txt)"]}}`, dir))
	for _, cmd := range []string{"git status", "git push origin main", "ls -la", "git push --force origin HEAD"} {
		decide(t, td, bypass.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
	}
	decide(t, td, def.ID, "Bash", `{"command":"npm test"}`)
	decide(t, td, def.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(dir, "secret.txt")))
	if code, res := td.call(t, bypass.ID, "Bash", `{"command":"echo replayed-call"}`); code != 200 || res.IsError {
		t.Fatalf("bash call: %d %+v", code, res)
	}

	out, stderr, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--deny", "Bash(git push:*)")
	if code != 0 || strings.Count(out, "  allow→deny  ") != 2 || !strings.Contains(out, "git push origin main") ||
		!strings.Contains(out, "git push --force origin HEAD") || strings.Contains(out, "git status") ||
		!strings.Contains(out, "2 changes (allow→deny 2)") {
		t.Fatalf("replay --deny: exit %d\n%s%s", code, out, stderr)
	}
	out, stderr, code = sbctl(t, bin, td.socket, nil, "--json", "audit", "replay", "--allow", "Bash(npm test)", "--fail-on", "loosen")
	var rows []struct {
		Seq     uint64 `json:"seq"`
		Tool    string `json:"tool"`
		Input   string `json:"input"`
		Change  string `json:"change"`
		Loosens bool   `json:"loosens"`
		New     struct{ Behavior, Rule string }
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 1 || len(rows) != 1 ||
		rows[0].Input != "npm test" || rows[0].Change != "ask→allow" || !rows[0].Loosens || rows[0].New.Rule != "Bash(npm test)" {
		t.Fatalf("replay --allow --json --fail-on loosen: exit %d %v\n%s%s", code, err, out, stderr)
	}
	// A window: calls inside it are replayed with rule sets recorded before it.
	if out, _, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--since", "1h", "--session", bypass.ID, "--deny", "Bash(git push:*)"); code != 0 || !strings.Contains(out, "2 changes (allow→deny 2)") {
		t.Errorf("replay --since 1h --session: exit %d\n%s", code, out)
	}
	if out, _, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--until", "1h", "--deny", "Bash(git push:*)"); code != 0 || !strings.Contains(out, "replayed 0 calls") {
		t.Errorf("replay --until 1h (before any call): exit %d\n%s", code, out)
	}
	if _, _, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--deny", "Bash(git push:*)", "--fail-on", "loosen"); code != 0 {
		t.Errorf("a deny loosens nothing: --fail-on loosen exit %d", code)
	}
	if _, _, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--deny", "Bash(git push:*)", "--fail-on", "any"); code != 1 {
		t.Errorf("--fail-on any with changes: exit %d", code)
	}
	if out, _, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--fail-on", "any"); code != 0 || !strings.Contains(out, "no changes") {
		t.Errorf("unchanged policy: exit %d\n%s", code, out)
	}

	// A candidate admin policy directory (custom Rego and settings) and a bundle, read by sbctl.
	pdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pdir, "nostatus.rego"), []byte("package sandboxd.custom\n\nimport rego.v1\n\n"+
		"deny contains \"no git status here\" if {\n\tinput.tool == \"Bash\"\n\tinput.input.command == \"git status\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "managed.json"), []byte(`{"permissions":{"deny":["Bash(ls:*)"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = sbctl(t, bin, td.socket, nil, "--json", "audit", "replay", "--policy-dir", pdir)
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); err != nil || code != 0 || len(rows) != 2 ||
		rows[0].Input != "git status" || rows[1].Input != "ls -la" || rows[1].New.Rule != "Bash(ls:*)" {
		t.Fatalf("replay --policy-dir: exit %d %v\n%s%s", code, err, out, stderr)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	writeBundle(t, bundle, "custom/noecho.rego", "package sandboxd.custom\n\nimport rego.v1\n\n"+
		"deny contains \"no echo\" if {\n\tinput.tool == \"Bash\"\n\tstartswith(input.input.command, \"echo \")\n}\n")
	out, stderr, code = sbctl(t, bin, td.socket, nil, "audit", "replay", "--bundle", bundle)
	if code != 0 || !strings.Contains(out, "echo replayed-call") || !strings.Contains(out, "1 changes (allow→deny 1)") {
		t.Fatalf("replay --bundle: exit %d\n%s%s", code, out, stderr)
	}

	// Offline on a copy of the log: the same answer; a tampered copy is refused.
	copyDir := filepath.Join(t.TempDir(), "audit")
	if b, err := exec.Command("cp", "-a", filepath.Join(td.state, "audit"), copyDir).CombinedOutput(); err != nil {
		t.Fatalf("copy log: %v %s", err, b)
	}
	out, stderr, code = sbctl(t, bin, td.socket, nil, "audit", "replay", "--dir", copyDir, "--deny", "Bash(git push:*)")
	if code != 0 || !strings.Contains(out, "2 changes (allow→deny 2)") {
		t.Fatalf("offline replay: exit %d\n%s%s", code, out, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(copyDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no log files in the copy")
	}
	b, _ := os.ReadFile(files[0])
	if err := os.WriteFile(files[0], bytes.Replace(b, []byte("git status"), []byte("git stAtus"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := sbctl(t, bin, td.socket, nil, "audit", "replay", "--dir", copyDir); code != 1 || !strings.Contains(stderr, "not intact") {
		t.Errorf("tampered copy: exit %d\n%s%s", code, out, stderr)
	}
	u := testutil.CreateUser(t, "sbreplay")
	if _, stderr, code := sbctl(t, bin, td.socket, &u, "audit", "replay"); code == 0 || !strings.Contains(stderr, "admin") {
		t.Errorf("a non-admin replayed the live log: exit %d %s", code, stderr)
	}

	out, _, code = sbctl(t, bin, td.socket, nil, "audit", "query", "--kind", "call.decide,call.end", "--grep", "git push")
	if code != 0 || strings.Count(out, "git push") != 2 || strings.Contains(out, "ls -la") || !strings.Contains(out, "INPUT") {
		t.Errorf("query --grep: exit %d\n%s", code, out)
	}
	out, _, code = sbctl(t, bin, td.socket, nil, "audit", "query", "--kind", "call.end")
	if code != 0 || !strings.Contains(out, "echo replayed-call") {
		t.Errorf("query does not show the command: exit %d\n%s", code, out)
	}
	out, _, code = sbctl(t, bin, td.socket, nil, "--json", "audit", "stats")
	var st struct {
		Calls          int                    `json:"calls"`
		TopDenied      []struct{ Key string } `json:"top_denied"`
		TopAskingRules []struct{ Key string } `json:"top_asking_rules"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || st.Calls != 7 ||
		len(st.TopDenied) != 1 || !strings.Contains(st.TopDenied[0].Key, "secret.txt") || len(st.TopAskingRules) != 1 {
		t.Errorf("stats: exit %d %v\n%s", code, err, out)
	}
	out, _, code = sbctl(t, bin, td.socket, nil, "audit", "export", "--format", "ocsf", "--kind", "call.decide")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 6 {
		t.Fatalf("export ocsf: exit %d, %d lines\n%s", code, len(lines), out)
	}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev["class_uid"] == nil || ev["metadata"] == nil {
			t.Errorf("ocsf line: %v %s", err, l)
		}
	}
}

// writeBundle writes an OPA bundle (tar.gz) holding one module.
func writeBundle(t *testing.T, path, name, module string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "/" + name, Mode: 0o644, Size: int64(len(module))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(module)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
