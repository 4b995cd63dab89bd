package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// serve runs h on a Unix socket: net/http's server, as the daemon's.
func serve(t *testing.T, h http.Handler) *Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return New(sock)
}

func TestHTTP1(t *testing.T) {
	big := strings.Repeat("x", 100<<10) // over net/http's buffer: sent chunked
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/healthz", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(protocol.Health{Status: "ok", Version: r.Header.Get("User-Agent")})
	})
	mux.HandleFunc("GET /v1/sessions/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "big" {
			json.NewEncoder(w).Encode(protocol.Session{ID: big})
			return
		}
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":{"class":"not_found","message":"session not found"}}`)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/calls", func(w http.ResponseWriter, r *http.Request) {
		var req protocol.CallRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Tool != "Bash" {
			w.WriteHeader(400)
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "ndjson") {
			json.NewEncoder(w).Encode(protocol.CallResult{Tool: "Bash", Decision: &protocol.Decision{Behavior: protocol.Allow}})
			return
		}
		enc := json.NewEncoder(w)
		for i := range 3 {
			enc.Encode(protocol.StreamLine{Event: &protocol.Event{Kind: "stdout", Data: fmt.Sprint(i)}})
			w.(http.Flusher).Flush()
		}
		enc.Encode(protocol.StreamLine{Result: &protocol.CallResult{Tool: "Bash", Decision: &protocol.Decision{Behavior: protocol.Allow}}})
	})
	mux.HandleFunc("GET /v1/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	c := serve(t, mux)
	ctx := context.Background()

	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.Version != "sbctl" {
		t.Errorf("health %+v %v", h, err)
	}
	s, err := c.Session(ctx, "big")
	if err != nil || s.ID != big {
		t.Errorf("chunked body: %d bytes, %v", len(s.ID), err)
	}
	_, err = c.Session(ctx, "gone")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Detail.Class != "not_found" {
		t.Errorf("404: %v", err)
	}
	res, err := c.Call(ctx, "s1", protocol.CallRequest{Tool: "Bash", Input: json.RawMessage(`{"command":"x"}`)})
	if err != nil || res.Decision.Behavior != protocol.Allow {
		t.Errorf("call %+v %v", res, err)
	}
	var got []string
	res, err = c.Stream(ctx, "s1", protocol.CallRequest{Tool: "Bash", Input: json.RawMessage(`{}`)}, func(e protocol.Event) { got = append(got, e.Data) })
	if err != nil || res == nil || strings.Join(got, "") != "012" {
		t.Errorf("stream: %v %v %v", got, res, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.Do(cctx, MethodGet, "/v1/slow", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled request: %v", err)
	}
	if _, err := New(filepath.Join(t.TempDir(), "none.sock")).Health(ctx); !errors.Is(err, ErrUnavailable) {
		t.Errorf("no daemon: %v", err)
	} else if !strings.Contains(err.Error(), "systemctl start sandboxd.socket") || !strings.Contains(err.Error(), "SANDBOXD_SOCKET") {
		// An installed machine has no make run: say how it starts there, and how to point elsewhere.
		t.Errorf("no daemon, and no word on how to start it or point sbctl elsewhere: %v", err)
	}
}
