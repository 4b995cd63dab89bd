package api

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// panicky is a Backend whose health handler panics; the other methods are never reached.
type panicky struct {
	Backend
}

func (panicky) Identify(p Peer) (session.Caller, error) {
	return session.Caller{UID: p.UID, Admin: true}, nil
}

func (panicky) Health(session.Caller) protocol.Health { panic("boom") }

func withPeer(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), peerKey{}, Peer{UID: 0}))
}

func TestPanicIsRecoveredCountedAndServingGoesOn(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := NewServer(zaptest.NewLogger(t), panicky{}, 1<<20, reg)
	for i := 0; i < 2; i++ {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, withPeer(httptest.NewRequest("GET", "/v1/healthz", nil)))
		if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"class":"internal"`) {
			t.Fatalf("panic answered %d %s", rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, withPeer(httptest.NewRequest("GET", "/v1/metrics", nil)))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "sandboxd_handler_panics_total 2") {
		t.Errorf("panic counter not at 2:\n%s", body)
	}
}

func TestRequestWithoutPeerIsRefused(t *testing.T) {
	s := NewServer(zaptest.NewLogger(t), panicky{}, 1<<20, prometheus.NewRegistry())
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/healthz", nil))
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "peer credentials") {
		t.Errorf("no-peer request: %d %s", rec.Code, rec.Body)
	}
}
