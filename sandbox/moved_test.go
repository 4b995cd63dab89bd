package sandbox

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestMovedAsideBounded: a call that makes hundreds of paths an Edit deny names has each moved
// aside, but its result names only the first few hundred and counts the rest; a name that is
// not valid UTF-8 is shown quoted, so two such names stay two.
func TestMovedAsideBounded(t *testing.T) {
	s := newTestSandbox(t, Config{})
	for _, tc := range []struct {
		script       string
		listed, more int
		quotedAndTwo bool
	}{
		{`for i in $(seq 400); do : > f$i.lock; done`, maxMovedListed, 400 - maxMovedListed, false},
		{`: > $'\xff.lock'; : > $'\xfe.lock'`, 2, 0, true},
	} {
		f := newProtectFixture(t)
		sp := f.spec(tc.script+"; echo done", f.repo, f.repo)
		sp.GuardPatterns = []string{escapePattern(f.repo) + "/**/*.lock"}
		sp.ProtectedPatterns = sp.GuardPatterns
		sp.MoveAsideCreated, sp.Call = true, "c1"
		res, out, err := run(t, s, ctxTimeout(t, 60*time.Second), sp)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("%v %q", err, out)
		}
		if len(res.MovedAside) != tc.listed || res.MovedAsideMore != tc.more {
			t.Errorf("%s: %d named and %d more, want %d and %d", tc.script, len(res.MovedAside), res.MovedAsideMore, tc.listed, tc.more)
		}
		if tc.quotedAndTwo && (res.MovedAside[0] == res.MovedAside[1] || !strings.HasPrefix(res.MovedAside[0], `"`) || !strings.Contains(res.MovedAside[0], `\x`)) {
			t.Errorf("names not valid UTF-8 shown as %q", res.MovedAside)
		}
		es, _ := os.ReadDir(f.repo)
		for _, e := range es {
			if strings.HasSuffix(e.Name(), ".lock") {
				t.Errorf("%s: %q left in place", tc.script, e.Name())
				break
			}
		}
	}
}
