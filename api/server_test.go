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

	"github.com/sandboxd/sandboxd/internal/procs"
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

// holdsSeen is a Backend that records procs.Holds() inside Health and Sessions; a Health
// that finds a gate queued says so on entered and blocks until the gate is closed.
type holdsSeen struct {
	Backend
	seen    chan int
	entered chan struct{}
	gates   chan chan struct{}
}

func (b *holdsSeen) Identify(p Peer) (session.Caller, error) {
	return session.Caller{UID: p.UID, Admin: true}, nil
}

func (b *holdsSeen) Health(session.Caller) protocol.Health {
	b.seen <- procs.Holds()
	select {
	case g := <-b.gates:
		b.entered <- struct{}{}
		<-g
	default:
	}
	return protocol.Health{Status: "ok"}
}

func (b *holdsSeen) Sessions(session.Caller) []session.Snapshot {
	b.seen <- procs.Holds()
	return nil
}

// A lone call-like request runs narrow; one beside it, and any other route, widens the
// scheduler while it runs (package procs), and every hold ends with its request.
func TestRequestsBesideALoneOneHoldParallel(t *testing.T) {
	base := procs.Holds()
	b := &holdsSeen{seen: make(chan int, 4), entered: make(chan struct{}, 1), gates: make(chan chan struct{}, 1)}
	s := NewServer(zaptest.NewLogger(t), b, 1<<20, prometheus.NewRegistry())
	get := func(path string) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, withPeer(httptest.NewRequest("GET", path, nil)))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
	get("/v1/healthz")
	if got := <-b.seen - base; got != 0 {
		t.Errorf("a lone healthz held %d, want 0", got)
	}
	get("/v1/sessions")
	if got := <-b.seen - base; got != 1 {
		t.Errorf("a sessions listing held %d, want 1", got)
	}

	gate := make(chan struct{})
	b.gates <- gate
	done := make(chan struct{})
	go func() { defer close(done); get("/v1/healthz") }()
	<-b.entered
	if got := <-b.seen - base; got != 0 {
		t.Errorf("the first healthz held %d, want 0", got)
	}
	get("/v1/healthz") // no gate queued: it does not block
	if got := <-b.seen - base; got != 1 {
		t.Errorf("a healthz beside another held %d, want 1", got)
	}
	close(gate)
	<-done
	if got := procs.Holds() - base; got != 0 {
		t.Errorf("%d holds left after every request ended", got)
	}
}
