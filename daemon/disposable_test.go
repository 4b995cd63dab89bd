package daemon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestDisposableSessionsMakeRoom: at limits.sessions_per_user, a new session ends the user's
// least recently used disposable session (sbctl hook's, made again on demand) that runs
// nothing and waits on no approval, and says so in the audit log; a session that is not
// disposable, or one with an approval pending, is never ended for it, and with none left to
// end the new session is refused as before.
func TestDisposableSessionsMakeRoom(t *testing.T) {
	td := startDaemon(t, "limits:\n  sessions_per_user: 3\n")
	dir := testHostDir(t)
	create := func(extra string) (int, string) {
		code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q%s}`, dir, extra))
		return code, string(b)
	}
	session := func(extra string) string {
		return td.newSession(t, fmt.Sprintf(`{"cwd":%q%s}`, dir, extra)).ID
	}
	a, b, c := session(`,"disposable":true`), session(`,"disposable":true`), session(``)
	// b is used after a: a is the least recently used.
	if code, body := td.do(t, "GET", "/v1/sessions/"+b, ""); code != http.StatusOK {
		t.Fatalf("get b: %d %s", code, body)
	}
	d := session(``)
	if code, _ := td.do(t, "GET", "/v1/sessions/"+a, ""); code != http.StatusNotFound {
		t.Errorf("the least recently used disposable session is still there: %d", code)
	}
	for _, id := range []string{b, c, d} {
		if code, _ := td.do(t, "GET", "/v1/sessions/"+id, ""); code != http.StatusOK {
			t.Errorf("session %s was ended too: %d", id, code)
		}
	}
	if _, recs := td.do(t, "GET", "/v1/audit/records?kind=session.delete&session="+a, ""); !strings.Contains(string(recs), `"reason":"evicted"`) {
		t.Errorf("no session.delete record saying why: %s", recs)
	}
	// b waits on an approval now: nothing is left to end.
	if _, res := td.call(t, b, "Bash", `{"command":"touch made-by-b"}`); res.Decision == nil || res.Decision.Behavior != "ask" {
		t.Fatalf("a write in default mode was not asked: %+v", res)
	}
	if code, body := create(`,"disposable":true`); code != http.StatusConflict || !strings.Contains(body, "sessions_per_user") {
		t.Errorf("a fourth session with nothing to end: %d %s", code, body)
	}
	if code, _ := td.do(t, "GET", "/v1/sessions/"+b, ""); code != http.StatusOK {
		t.Errorf("the disposable session with an approval pending was ended: %d", code)
	}
}

// TestWaitingCallOfDeletedSessionIsDenied: a call waiting on its approval when its session is
// deleted is denied, saying so, not told its approval is still pending (it is gone).
func TestWaitingCallOfDeletedSessionIsDenied(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, testHostDir(t)))
	done := make(chan protocol.CallResult, 1)
	go func() {
		_, b := td.do(t, "POST", "/v1/sessions/"+s.ID+"/calls", `{"tool":"Bash","input":{"command":"touch w"},"wait_ms":20000}`)
		var res protocol.CallResult
		_ = json.Unmarshal(b, &res)
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, b := td.do(t, "GET", "/v1/approvals", "")
		if strings.Contains(string(b), s.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the call never asked: %s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, b := td.do(t, "DELETE", "/v1/sessions/"+s.ID, ""); code != http.StatusNoContent && code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, b)
	}
	res := <-done
	if res.Decision == nil || res.Decision.Behavior != "deny" || !strings.Contains(res.Decision.Reason, "the session was deleted") {
		t.Errorf("the waiting call of a deleted session: %+v %+v", res.Decision, res.Error)
	}
}
