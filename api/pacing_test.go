package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// decider is a Backend that finds any session of its caller's and decides every call allow.
type decider struct {
	Backend
}

func (decider) Identify(p Peer) (session.Caller, error) { return session.Caller{UID: p.UID}, nil }

func (decider) Session(c session.Caller, id string) (*session.Session, error) {
	return &session.Session{ID: id, Owner: c}, nil
}

func (decider) Decide(_ context.Context, _ *session.Session, _ session.Caller, cr protocol.CallRequest) (Outcome, error) {
	return Outcome{Result: protocol.CallResult{Tool: cr.Tool, Decision: &protocol.Decision{Behavior: "allow"}}}, nil
}

// TestLargeBodyFitsTheBurst: a request takes a token on arrival and one per 8 KiB of body
// past its first, at most the burst in all. The body's share was capped at the burst on its
// own, so a body of 800 KiB or more wanted one token more than a full bucket ever holds: a
// request max_request_bytes allows was refused (429) however long its client waited.
func TestLargeBodyFitsTheBurst(t *testing.T) {
	s := NewServer(zaptest.NewLogger(t), decider{}, 1<<20, prometheus.NewRegistry())
	body := fmt.Sprintf(`{"tool":"Write","input":{"file_path":"/x","content":%q}}`, strings.Repeat("z", 1000<<10))
	req := httptest.NewRequest("POST", "/v1/sessions/s_x/decide", strings.NewReader(body))
	req = req.WithContext(context.WithValue(req.Context(), peerKey{}, Peer{UID: 4242}))
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req) // the first request of uid 4242: its bucket is full
	if rec.Code != http.StatusOK {
		t.Fatalf("a %d KiB body with a full bucket: %d %.300s", len(body)>>10, rec.Code, rec.Body)
	}
}
