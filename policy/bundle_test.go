package policy

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	bundleapi "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/sandboxd/sandboxd/permission"
)

const hmacSecret = "fleet-secret"

// makeBundle builds a bundle tarball with one custom module, signed with HS256 when sign.
func makeBundle(t *testing.T, rev, module string, sign bool) []byte {
	t.Helper()
	b := bundleapi.Bundle{
		Manifest: bundleapi.Manifest{Revision: rev, Roots: &[]string{"sandboxd/custom"}},
		Modules:  []bundleapi.ModuleFile{{URL: "/custom/fleet.rego", Path: "/custom/fleet.rego", Raw: []byte(module), Parsed: ast.MustParseModuleWithOpts(module, ast.ParserOptions{RegoVersion: ast.RegoV1})}},
		Data:     map[string]any{},
	}
	if sign {
		if err := b.GenerateSignature(bundleapi.NewSigningConfig(hmacSecret, "HS256", ""), "fleet", false); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := bundleapi.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type bundleServer struct {
	mu       sync.Mutex
	body     []byte
	etag     string
	gets     atomic.Int32
	notMod   atomic.Int32
	logs     []map[string]any
	logsSeen chan struct{}
}

func (s *bundleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/bundles/sandboxd.tar.gz":
		s.gets.Add(1)
		s.mu.Lock()
		body, etag := s.body, s.etag
		s.mu.Unlock()
		if r.Header.Get("If-None-Match") == etag {
			s.notMod.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		_, _ = w.Write(body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/logs":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var evs []map[string]any
		if err := json.NewDecoder(zr).Decode(&evs); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		s.mu.Lock()
		s.logs = append(s.logs, evs...)
		s.mu.Unlock()
		select {
		case s.logsSeen <- struct{}{}:
		default:
		}
	default:
		http.NotFound(w, r)
	}
}

func (s *bundleServer) set(body []byte, etag string) {
	s.mu.Lock()
	s.body, s.etag = body, etag
	s.mu.Unlock()
}

func newBundleServer(t *testing.T) (*bundleServer, string) {
	bs := &bundleServer{logsSeen: make(chan struct{}, 1)}
	srv := httptest.NewServer(bs) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return bs, srv.URL + "/v1"
}

func TestBundleFleet(t *testing.T) {
	bs, url := newBundleServer(t)
	bs.set(makeBundle(t, "r1", customDenyLs, true), `"r1"`)
	events := make(chan ReloadEvent, 16)
	e := newEngine(t, Config{
		OnReload: func(ev ReloadEvent) { events <- ev },
		Bundle: &BundleConfig{
			ServiceURL: url, Resource: "bundles/sandboxd.tar.gz", MinDelay: time.Hour, MaxDelay: time.Hour,
			Signing:      &BundleSigning{KeyID: "fleet", Algorithm: "HS256", Key: hmacSecret},
			DecisionLogs: true, DecisionLogsInterval: time.Hour, AllowInsecureDecisionLogs: true,
		},
	})
	waitEvent := func(want string) ReloadEvent {
		t.Helper()
		for {
			select {
			case ev := <-events:
				if ev.Trigger == want {
					return ev
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s event", want)
			}
		}
	}
	if ev := waitEvent("bundle"); ev.Err != nil {
		t.Fatalf("first bundle: %v", ev.Err)
	}
	if rev, etag := e.BundleRevision(); rev != "r1" || etag != `"r1"` {
		t.Errorf("revision %q etag %q", rev, etag)
	}
	if d := decide(t, e, lsCall); d.Behavior != permission.Deny || d.Step != "custom_deny" {
		t.Fatalf("bundle's custom deny not in force: %+v", d)
	}
	// Same ETag: 304, nothing reloaded.
	if err := e.TriggerBundle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bs.notMod.Load() != 1 {
		t.Errorf("conditional GET not used: %d 304s of %d GETs", bs.notMod.Load(), bs.gets.Load())
	}
	// A bundle signed with another key is refused; the policy in force stays.
	before := e.Digest()
	b := makeBundle(t, "r2", "package sandboxd.custom\n", false)
	bs.set(b, `"r2"`)
	if err := e.TriggerBundle(context.Background()); err == nil || !strings.Contains(err.Error(), "signatures") {
		t.Fatalf("unsigned bundle accepted: %v", err)
	}
	if e.Digest() != before {
		t.Error("unsigned bundle replaced the policy")
	}
	// A bundle outside package sandboxd.custom is refused too.
	bs.set(makeBundle(t, "r3", "package sandboxd.main\n\nimport rego.v1\n\nx := 1\n", true), `"r3"`)
	if err := e.TriggerBundle(context.Background()); err == nil {
		t.Fatal("bundle outside sandboxd.custom accepted")
	}
	if rev, _ := e.BundleRevision(); rev != "r1" || e.Digest() != before {
		t.Errorf("refused bundle changed state: rev %q", rev)
	}
	// Decision logs reach the service in OPA's event shape.
	if err := e.FlushDecisionLogs(context.Background()); err != nil {
		t.Fatal(err)
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if len(bs.logs) == 0 {
		t.Fatal("no decision logs uploaded")
	}
	ev := bs.logs[0]
	if ev["path"] != "sandboxd/main/decision" || ev["decision_id"] == "" || ev["result"].(map[string]any)["behavior"] != "deny" {
		t.Errorf("decision log event: %v", ev)
	}
}

func TestBundleConfigValidation(t *testing.T) {
	for name, bc := range map[string]BundleConfig{
		"no url":        {Resource: "x"},
		"ftp":           {ServiceURL: "ftp://x/", Resource: "x"},
		"no resource":   {ServiceURL: "http://127.0.0.1/"},
		"needs signing": {ServiceURL: "http://127.0.0.1/", Resource: "x", RequireSignature: true},
	} {
		t.Run(name, func(t *testing.T) {
			bc := bc
			if _, err := New(context.Background(), Config{Bundle: &bc}, nil); err == nil {
				t.Error("bad bundle config accepted")
			}
		})
	}
}

// TestBundleFullPolicy: a full-policy bundle replaces the embedded Rego once it arrives.
func TestBundleFullPolicy(t *testing.T) {
	bs, url := newBundleServer(t)
	full := `package sandboxd.main

import rego.v1

steps := ["fleet"]

# METADATA
# entrypoint: true
decision := {"allow": false, "behavior": "deny", "reason": "fleet says no", "source": "fleet", "step": "fleet", "i": 0}
`
	b := bundleapi.Bundle{
		Manifest: bundleapi.Manifest{Revision: "full-1", Roots: &[]string{"sandboxd"}},
		Modules:  []bundleapi.ModuleFile{{URL: "/main/main.rego", Path: "/main/main.rego", Raw: []byte(full), Parsed: ast.MustParseModuleWithOpts(full, ast.ParserOptions{RegoVersion: ast.RegoV1})}},
		Data:     map[string]any{},
	}
	var buf bytes.Buffer
	if err := bundleapi.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	bs.set(buf.Bytes(), `"full-1"`)
	e := newEngine(t, Config{Bundle: &BundleConfig{ServiceURL: url, Resource: "bundles/sandboxd.tar.gz", FullPolicy: true, MinDelay: time.Hour}})
	if err := e.TriggerBundle(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := decide(t, e, lsCall)
	if d.Behavior != permission.Deny || d.Reason != "fleet says no" || len(d.Trace) != 1 {
		t.Errorf("full-policy bundle not in force: %+v", d)
	}
	for name := range e.Modules() {
		if strings.HasPrefix(name, "embedded:") {
			t.Errorf("embedded module %s still loaded under a full-policy bundle", name)
		}
	}
}
