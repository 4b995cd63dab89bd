package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
)

// writeLog writes n call records as the daemon does: Bash and Read calls, one in every
// distinctEvery with an input no other record has (so nothing remembered answers it), under
// one rule set recorded in full once.
func writeLog(tb testing.TB, n, distinctEvery int) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "audit")
	l, err := audit.Open(audit.Config{Dir: dir}, zap.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	var rules []permission.Rule
	for _, x := range []struct {
		text string
		b    permission.Behavior
	}{{"Bash(git push:*)", permission.Deny}, {"Read(./.env)", permission.Deny}, {"Bash(npm test)", permission.Allow}, {"Bash(git commit:*)", permission.Ask}} {
		r, err := permission.ParseRuleFor(x.text, x.b)
		if err != nil {
			tb.Fatal(err)
		}
		r.Source = permission.SourceSession
		rules = append(rules, r)
	}
	rs := permission.NewRuleSet(rules, permission.Effective{DefaultMode: permission.ModeDefault}, permission.Anchors{Home: "/home/u", Cwd: "/home/u/p"})
	rulesJS, _ := json.Marshal(RulesOf(rs))
	cmds := []string{"git status", "ls -la", "npm test", "git push origin main", "cat README.md | head -5", "go test ./...", "git commit -m x"}
	for i := range n {
		var tool, cmd string
		var input []byte
		f := &permission.Facts{Caller: permission.Caller{UID: 1000, GID: 1000, User: "u"}, Cwd: "/home/u/p", Home: "/home/u",
			Dirs: []string{"/home/u/p"}, Mode: permission.ModeDefault}
		if i%4 == 3 {
			tool = "Read"
			p := fmt.Sprintf("/home/u/p/file%d.go", i%50)
			if i%distinctEvery == 0 {
				p = fmt.Sprintf("/home/u/p/file%d.go", i)
			}
			input, _ = json.Marshal(map[string]any{"file_path": p})
			f.ReadOnly = true
			f.Paths = []permission.PathFact{{Requested: p, Resolved: p, Access: permission.Read}}
		} else {
			tool = "Bash"
			cmd = cmds[i%len(cmds)]
			if i%distinctEvery == 0 {
				cmd = fmt.Sprintf("grep -n item%d src/main.go", i)
			}
			input, _ = json.Marshal(map[string]any{"command": cmd})
			f.Bash = classifier.Classify(cmd, classifier.Options{})
		}
		factsJS, _ := json.Marshal(FactsOf(f))
		detail := map[string]string{DetailFacts: string(factsJS), DetailRulesDigest: rs.Digest(), DetailPolicyDigest: "d"}
		if i == 0 {
			detail[DetailRules] = string(rulesJS)
		}
		rec := &audit.Record{Kind: audit.KindCallEnd, Caller: &audit.Caller{UID: 1000, GID: 1000, User: "u"}, Session: "s1",
			Mode: "default", Tool: tool, Input: input, Decision: &audit.Decision{Behavior: "allow"}, Detail: detail}
		if err := l.Enqueue(rec); err != nil {
			tb.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// BenchmarkReplay100k replays a 100 000-record log; records/s is the figure (goal: 20 000),
// with every other call distinct (a pessimistic log) and one in ten, with one decision at a
// time and with one per CPU.
func BenchmarkReplay100k(b *testing.B) {
	const n = 100_000
	mods, err := policy.EmbeddedModules()
	if err != nil {
		b.Fatal(err)
	}
	for _, distinct := range []int{2, 10} {
		dir := writeLog(b, n, distinct)
		for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
			b.Run(fmt.Sprintf("distinct=1in%d/workers=%d", distinct, workers), func(b *testing.B) {
				for range b.N {
					r, err := New(context.Background(), mods, Candidate{Deny: []string{"Bash(grep:*)"}})
					if err != nil {
						b.Fatal(err)
					}
					start, cpu0 := time.Now(), cpuTime()
					st, err := r.run(context.Background(), audit.Query(dir, audit.Filter{}), nil, func(*Change) error { return nil }, workers)
					if err != nil {
						b.Fatal(err)
					}
					if st.Replayed != n || st.Changed == 0 {
						b.Fatalf("replayed %d of %d, %d changed: skipped %v", st.Replayed, n, st.Changed, st.Skipped)
					}
					b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
					// What a loaded host cannot skew: the records one CPU-second replays.
					b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "records/cpu-s")
					r.Close()
				}
			})
		}
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
