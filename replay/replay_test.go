package replay

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
)

func newReplayer(t testing.TB, cand Candidate) *Replayer {
	t.Helper()
	mods, err := policy.EmbeddedModules()
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(context.Background(), mods, cand)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// recorded is a call.end record as the daemon writes it for a Bash command in bypassPermissions.
func recorded(t testing.TB, seq uint64, cmd string, withRules bool) *audit.Record {
	t.Helper()
	rs := permission.NewRuleSet(nil, permission.Effective{DefaultMode: permission.ModeDefault}, permission.Anchors{Home: "/home/u", Cwd: "/home/u/p"})
	facts, _ := json.Marshal(Facts{Caller: permission.Caller{UID: 1000, User: "u"}, Cwd: "/home/u/p", Home: "/home/u", Dirs: []string{"/home/u/p"},
		Bash: classifier.Classify(cmd, classifier.Options{})})
	input, _ := json.Marshal(map[string]string{"command": cmd})
	rec := &audit.Record{V: audit.Version, Seq: seq, Time: time.Now(), Kind: audit.KindCallEnd, Caller: &audit.Caller{UID: 1000, User: "u"},
		Session: "s1", Mode: "bypassPermissions", Tool: "Bash", Input: input, Decision: &audit.Decision{Behavior: "allow"},
		Detail: map[string]string{DetailFacts: string(facts), DetailRulesDigest: rs.Digest(), DetailPolicyDigest: "p"}}
	if withRules {
		b, _ := json.Marshal(RulesOf(rs))
		rec.Detail[DetailRules] = string(b)
	}
	return rec
}

func records(recs ...*audit.Record) func(func(*audit.Record, error) bool) {
	return func(yield func(*audit.Record, error) bool) {
		for _, r := range recs {
			if !yield(r, nil) {
				return
			}
		}
	}
}

// Records that cannot be replayed are counted with the reason, never dropped silently, and
// changes come in log order whatever the number of workers.
func TestRunCountsSkipsAndKeepsOrder(t *testing.T) {
	r := newReplayer(t, Candidate{Deny: []string{"Bash(git push:*)"}})
	noFacts := recorded(t, 2, "git push", false)
	delete(noFacts.Detail, DetailFacts)
	orphan := recorded(t, 3, "git push", false)
	orphan.Detail[DetailRulesDigest] = "unknown"
	cut := recorded(t, 4, "git push", false)
	cut.Input = json.RawMessage(`{"truncated":true,"bytes":99999,"preview":"{\"command\":\"git pu"}`)
	omitted := recorded(t, 5, "git push", false)
	delete(omitted.Detail, DetailFacts)
	omitted.Detail[DetailFactsOmitted] = "99999"
	garbled := recorded(t, 6, "git push", false)
	garbled.Detail[DetailFacts] = `{"caller":{"ui`
	recs := []*audit.Record{recorded(t, 1, "ls", true), noFacts, orphan, cut, omitted, garbled}
	for i := range 50 {
		recs = append(recs, recorded(t, uint64(10+i), "git push origin b", false))
	}
	var seqs []uint64
	st, err := r.run(context.Background(), records(recs...), nil, func(c *Change) error {
		seqs = append(seqs, c.Seq)
		return nil
	}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if st.Replayed != 51 || st.Changed != 50 || st.Skipped[SkipNoFacts] != 1 || st.Skipped[SkipNoRules] != 1 ||
		st.Skipped[SkipTooLarge] != 2 || st.Skipped[SkipBadRecord] != 1 {
		t.Fatalf("stats %+v", st)
	}
	for i, s := range seqs {
		if s != uint64(10+i) {
			t.Fatalf("changes out of log order: %v", seqs)
		}
	}
}

// A recorded log holds whatever a copy's owner put in it: no detail value may panic the replay.
func FuzzDecide(f *testing.F) {
	f.Add(`{"caller":{"uid":1},"cwd":"/","bash":{"subcommands":[{"words":["ls"]}]}}`, `{"rules":[{"tool":"Bash","behavior":"deny","kind":"bash","pattern":"ls"}],"effective":{}}`, `{"command":"ls"}`, "bypassPermissions")
	f.Add(`{}`, `{"rules":null}`, `[]`, "")
	f.Add(`{"paths":[{"requested":"/x","resolved":"/x","access":"write"}]}`, `{"rules":[{"tool":"Edit","behavior":"allow","kind":"path","pattern":"**","anchor":"/"}]}`, `{"file_path":"/x"}`, "default")
	r := newReplayer(f, Candidate{Deny: []string{"Bash(rm:*)"}})
	f.Fuzz(func(t *testing.T, facts, rules, input, mode string) {
		rec := &audit.Record{Seq: 1, Kind: audit.KindCallEnd, Tool: "Bash", Mode: mode, Input: json.RawMessage(input),
			Decision: &audit.Decision{Behavior: "allow"},
			Detail:   map[string]string{DetailFacts: facts, DetailRules: rules, DetailRulesDigest: "d"}}
		if err := r.Learn(rec); err != nil {
			return
		}
		_, _ = r.Decide(context.Background(), rec)
		r.mu.Lock()
		clear(r.built)
		r.mu.Unlock()
	})
}

// A rule set the log could not keep whole makes its calls skips with that reason.
func TestRulesLeftOutAreSkips(t *testing.T) {
	r := newReplayer(t, Candidate{})
	big := recorded(t, 1, "ls", false)
	big.Detail[DetailRulesDigest] = "big"
	big.Detail[DetailRulesOmitted] = "400000"
	if err := r.Learn(big); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Decide(context.Background(), big); err == nil {
		t.Fatal("decided a call whose rule set was left out")
	} else if why, ok := IsSkip(err); !ok || why != SkipTooLarge {
		t.Fatalf("skip reason %q (%v)", why, err)
	}
}
