package classifier

import (
	"testing"
	"time"
)

// FuzzClassify checks that Classify never panics or hangs on arbitrary
// bytes and that read-only implies parsed with every subcommand read-only.
func FuzzClassify(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.cmd)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > maxParseLen+16 {
			t.Skip("beyond the parse bound")
		}
		start := time.Now()
		c := Classify(cmd, testOpts)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("classify took %v", d)
		}
		if c.Reason == "internal_error" {
			t.Fatalf("internal error (recovered panic) on %q", cmd)
		}
		checkInvariants(t, cmd, c)
		if c.ReadOnly && badChar(cmd) != "" {
			t.Fatalf("read-only with a control character: %q", cmd)
		}
		for _, s := range c.Subcommands {
			_ = MatchRule("git *", s.Prefix)
			_ = MatchRule("*", s.DenyPrefix)
		}
	})
}
