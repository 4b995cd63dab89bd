package daemon

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestOwnResultsAreReadable: a result too long to return whole names its file and tells the
// agent to Read it; that Read is of the session's own results, no read outside its dirs. It
// asked in default mode (denied in dontAsk), so the hint could not be followed. Another
// session's results stay outside.
func TestOwnResultsAreReadable(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"dontAsk"}`, dir))
	other := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"dontAsk"}`, dir))
	_, res := td.call(t, s.ID, "Bash", `{"command":"seq 1 300000"}`)
	saved, _ := res.Data["persistedOutputPath"].(string)
	if saved == "" {
		t.Fatalf("300 000 lines were not persisted: %v", res.Data)
	}
	in := fmt.Sprintf(`{"file_path":%q,"offset":299998,"limit":3}`, saved)
	if r := td.decideBy(t, s.ID, "Read", in, false); behavior(r) != permission.Allow {
		t.Errorf("the session's Read of its own result: %s (%s)", r.Decision.Behavior, r.Decision.Reason)
	}
	if r := td.decideBy(t, other.ID, "Read", in, false); behavior(r) == permission.Allow {
		t.Errorf("another session's Read of that result: %s (%s); want it outside its dirs", r.Decision.Behavior, r.Decision.Reason)
	}
	if _, r := td.call(t, s.ID, "Read", in); behavior(r) != permission.Allow || !strings.Contains(fmt.Sprint(r.Content), "300000") {
		t.Errorf("reading the result: %s %v", behavior(r), r.Content)
	}
}
