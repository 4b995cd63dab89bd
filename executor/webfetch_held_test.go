package executor

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// TestWebFetchHeldPerUser: what one user's fetches read into the daemon's memory is bounded
// together, not per call: a page (or the text a single-byte charset makes of it, three times
// its bytes) is cut at 10 MiB, a fetch while two whole ones of the user's run reads 1 MiB and
// says why, another user's is not held back, and the room is given back when each ends.
func TestWebFetchHeldPerUser(t *testing.T) {
	t.Parallel()
	h := &Host{}
	st := session.NewStore()
	sessionOf := func(uid uint32) *session.Session {
		return st.Create(session.Caller{UID: uid, GID: uid, User: "u", Home: "/nonexistent"},
			session.Params{Cwd: "/nonexistent", Mode: permission.ModeDefault})
	}
	u, _ := url.Parse("https://docs.test/big")
	fetch := func(s *session.Session, ctype, body string) string {
		t.Helper()
		resp := &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {ctype}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body))}
		res, err := h.webFetchResult(context.Background(), &Call{Session: s, Input: Input{}}, u, resp, 0)
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].Text
	}
	a, b := sessionOf(1001), sessionOf(1002)
	big := strings.Repeat("a", 12<<20)
	if out := fetch(a, "text/plain", big); !strings.Contains(out, "(cut at 10.0 MB of page or text)") || len(out) > 10<<20+1024 {
		t.Errorf("a 12 MiB page: %d bytes out, head %q", len(out), out[:200])
	}
	// 4 MiB of 0x80 in windows-1252 is 12 MiB of UTF-8 (each a three-byte euro sign).
	if out := fetch(a, "text/plain; charset=windows-1252", strings.Repeat("\x80", 4<<20)); !strings.Contains(out, "cut at 10.0 MB") || len(out) > 10<<20+1024 {
		t.Errorf("a page whose text outgrows it: %d bytes out, head %q", len(out), out[:200])
	}
	held := []int64{h.fetchHeld.take(1001, webFetchHeldBounds), h.fetchHeld.take(1001, webFetchHeldBounds)}
	if out := fetch(a, "text/plain", big); !strings.Contains(out, "cut at 1.0 MB of page or text: your other fetches running now hold") {
		t.Errorf("a fetch while two whole ones run: %q", out[:200])
	}
	if out := fetch(b, "text/plain", big); !strings.Contains(out, "(cut at 10.0 MB of page or text)") {
		t.Errorf("another user's fetch was held back: %q", out[:200])
	}
	for _, n := range held {
		h.fetchHeld.give(1001, n)
	}
	if len(h.fetchHeld.by) != 0 {
		t.Errorf("room still held after the fetches: %v", h.fetchHeld.by)
	}
}
