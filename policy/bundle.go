package policy

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	bundleapi "github.com/open-policy-agent/opa/v1/bundle"
	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/audit"
)

// BundleConfig makes the engine pull policy from an OPA bundle server, as a fleet does. The
// fields mirror OPA's configuration (services[].url, bundles[].resource, polling, keys and
// signing, decision_logs) and the wire behaviour is OPA's: GET the bundle tarball with
// If-None-Match, 304 keeps the current one, signatures are verified with OPA's bundle
// package, decision logs are POSTed gzipped to <service>/logs in OPA's event format.
//
// OPA's own downloader and decision-log plugin (v1/download, v1/plugins/logs) would pull
// modules (AWS config parsing, OpenTelemetry, OCI) this module does not depend on, so the
// small HTTP loop lives here and everything bundle-shaped is OPA's.
type BundleConfig struct {
	// ServiceURL is the bundle service base URL, e.g. https://policy.example.com/v1.
	ServiceURL string
	// Resource is the bundle's path under ServiceURL, e.g. bundles/sandboxd.tar.gz.
	Resource string
	// Name names the bundle in decision logs and signature checks; default "sandboxd".
	Name string
	// MinDelay and MaxDelay bound the polling interval (OPA polling.min/max_delay_seconds);
	// each wait is random in between so a fleet does not poll in lockstep. Defaults 60s/120s.
	MinDelay, MaxDelay time.Duration
	// BearerToken is sent as Authorization: Bearer (OPA credentials.bearer.token).
	BearerToken string
	// Signing verifies bundle signatures; nil accepts unsigned bundles unless RequireSignature.
	Signing *BundleSigning
	// RequireSignature refuses to start without Signing (fleets should sign).
	RequireSignature bool
	// FullPolicy: the bundle carries the whole policy and replaces the embedded Rego (it must
	// define data.sandboxd.main.decision). Otherwise its modules are custom policy and must
	// stay inside package sandboxd.custom, like PolicyDir files.
	FullPolicy bool
	// DecisionLogs uploads every decision to ServiceURL/logs; DecisionLogsInterval batches
	// them (default 10s). Logging never changes or delays a decision.
	DecisionLogs         bool
	DecisionLogsInterval time.Duration
	// AllowInsecureDecisionLogs lets decision logs go to an http:// service. They carry
	// every call's (redacted) input, so by default they go only to https://.
	AllowInsecureDecisionLogs bool
	// SizeLimitBytes caps a bundle (default OPA's 1 GiB default is far too big: 16 MiB).
	SizeLimitBytes int64
	// Client is the HTTP client; nil uses one with a 30 s timeout.
	Client *http.Client
}

// BundleSigning is OPA's keys + bundles[].signing for one verification key.
type BundleSigning struct {
	KeyID string
	// Algorithm is a JWS algorithm, e.g. RS256, ES256, HS256.
	Algorithm string
	// Key is the PEM public key (or the HMAC secret).
	Key string
	// Scope and Exclude are OPA's signing.scope and signing.exclude_files.
	Scope   string
	Exclude []string
}

func (c *BundleConfig) validate() error {
	u, err := url.Parse(c.ServiceURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("bundle service url %q: want http(s)://host/...", c.ServiceURL)
	}
	if c.Resource == "" {
		return errors.New("bundle resource is empty")
	}
	if c.DecisionLogs && u.Scheme != "https" && !c.AllowInsecureDecisionLogs {
		return fmt.Errorf("bundle decision logs to %q: they go only to an https:// service unless allowed insecure", c.ServiceURL)
	}
	if c.RequireSignature && c.Signing == nil {
		return errors.New("bundle signing is required but not configured")
	}
	if c.MinDelay < 0 || c.MaxDelay < 0 || (c.MaxDelay > 0 && c.MaxDelay < c.MinDelay) {
		return errors.New("bundle polling delays: want 0 <= min <= max")
	}
	return nil
}

// bundleState is the poller, the decision-log buffer and the last activated bundle.
type bundleState struct {
	cfg    BundleConfig
	client *http.Client
	log    *zap.Logger
	vc     *bundleapi.VerificationConfig

	// fetching serialises fetchBundle: the poller's first fetch and a TriggerBundle run side
	// by side, and the second would otherwise see the first's ETag (304, nothing to do) and
	// return before the first had loaded the bundle it names.
	fetching sync.Mutex

	mu       sync.Mutex
	mods     map[string]string
	revision string
	etag     string

	logMu  sync.Mutex
	events []decisionEvent
}

func (b *bundleState) full() bool {
	if b == nil {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cfg.FullPolicy && b.mods != nil
}

func (b *bundleState) modules() map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]string, len(b.mods))
	for k, v := range b.mods {
		out[k] = v
	}
	return out
}

// stop is a no-op: the poller and uploader are goroutines of the engine's wait group, stopped
// by its context; a last flush of decision logs happens there.
func (b *bundleState) stop(context.Context) {}

// BundleRevision is the activated bundle's manifest revision and ETag, for audit.
func (e *Engine) BundleRevision() (revision, etag string) {
	b := e.bundle.Load()
	if b == nil {
		return "", ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.revision, b.etag
}

// decisionEvent is OPA's decision log event (plugins/logs EventV1), the fields we fill.
type decisionEvent struct {
	Labels     map[string]string         `json:"labels"`
	DecisionID string                    `json:"decision_id"`
	Bundles    map[string]map[string]any `json:"bundles,omitempty"`
	Path       string                    `json:"path"`
	Input      json.RawMessage           `json:"input,omitempty"`
	Result     json.RawMessage           `json:"result,omitempty"`
	Timestamp  time.Time                 `json:"timestamp"`
	Custom     map[string]any            `json:"custom,omitempty"`
}

const maxBufferedEvents = 10000

// decisionLogInputMaxBytes bounds one event's input: a buffer of up to maxBufferedEvents of them stays
// bounded, and the service gets a preview of a larger one.
const decisionLogInputMaxBytes = 64 << 10

// logDecision buffers one decision for upload. The input and result are serialised here,
// only when logging is on; a full buffer drops the event rather than grow without bound.
func (b *bundleState) logDecision(_ context.Context, digest string, input ast.Value, result *ast.Term) {
	if !b.cfg.DecisionLogs {
		return
	}
	in, err1 := ast.JSON(input)
	res, err2 := ast.JSON(result.Value)
	inb, err3 := json.Marshal(in)
	// The same redaction and size bound as the audit log's input: the service is another
	// place the inputs' secrets could leak to, and a buffer of large inputs must stay bounded.
	inb, _ = audit.Redact(inb)
	inb = audit.TruncateInput(inb, decisionLogInputMaxBytes)
	resb, err4 := json.Marshal(res)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		b.log.Warn("decision log event not encodable", zap.Error(err))
		return
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	b.mu.Lock()
	rev := b.revision
	b.mu.Unlock()
	ev := decisionEvent{
		Labels:     map[string]string{"app": "sandboxd"},
		DecisionID: hex.EncodeToString(id[:]),
		Bundles:    map[string]map[string]any{b.name(): {"revision": rev}},
		Path:       strings.ReplaceAll(strings.TrimPrefix(Query, "data."), ".", "/"),
		Input:      inb,
		Result:     resb,
		Timestamp:  time.Now().UTC(),
		Custom:     map[string]any{"policy_digest": digest},
	}
	b.logMu.Lock()
	if len(b.events) < maxBufferedEvents {
		b.events = append(b.events, ev)
	}
	b.logMu.Unlock()
}

func (b *bundleState) name() string {
	if b.cfg.Name != "" {
		return b.cfg.Name
	}
	return "sandboxd"
}

// startBundle validates the config and starts the poller (and uploader). Until a bundle is
// activated the embedded policy (plus PolicyDir) stays in force.
func (e *Engine) startBundle(ctx context.Context) error {
	cfg := *e.cfg.Bundle
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("bundle config: %w", err)
	}
	if cfg.MinDelay == 0 {
		cfg.MinDelay = 60 * time.Second
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = max(2*cfg.MinDelay, cfg.MinDelay)
	}
	if cfg.SizeLimitBytes <= 0 {
		cfg.SizeLimitBytes = 16 << 20
	}
	if cfg.DecisionLogsInterval <= 0 {
		cfg.DecisionLogsInterval = 10 * time.Second
	}
	st := &bundleState{cfg: cfg, client: cfg.Client, log: e.log.Named("bundle")}
	if st.client == nil {
		st.client = &http.Client{Timeout: 30 * time.Second}
	}
	if s := cfg.Signing; s != nil {
		keyID := s.KeyID
		if keyID == "" {
			keyID = "default"
		}
		st.vc = bundleapi.NewVerificationConfig(map[string]*bundleapi.KeyConfig{
			keyID: {Key: s.Key, Algorithm: s.Algorithm, Scope: s.Scope},
		}, keyID, s.Scope, s.Exclude)
	}
	e.bundle.Store(st)
	e.wg.Add(1)
	go e.pollBundle(ctx, st)
	if cfg.DecisionLogs {
		e.wg.Add(1)
		go e.uploadLogs(ctx, st)
	}
	return nil
}

// TriggerBundle fetches the bundle now (as OPA's manual trigger), for SIGHUP and tests; it
// returns once the newest bundle is in force, waiting for a fetch already under way.
func (e *Engine) TriggerBundle(ctx context.Context) error {
	st := e.bundle.Load()
	if st == nil {
		return errors.New("no bundle configured")
	}
	return e.fetchBundle(ctx, st)
}

func (e *Engine) pollBundle(ctx context.Context, st *bundleState) {
	defer e.wg.Done()
	for {
		if err := e.fetchBundle(ctx, st); err != nil && ctx.Err() == nil {
			st.log.Warn("bundle fetch failed; policy unchanged", zap.Error(err))
			e.report("bundle", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(st.cfg.MinDelay, st.cfg.MaxDelay)):
		}
	}
}

func jitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(hi-lo)))
	if err != nil {
		return lo
	}
	return lo + time.Duration(n.Int64())
}

// fetchBundle does one conditional GET and activates a new bundle. Any failure (HTTP,
// signature, size, compile) keeps the policy in force.
func (e *Engine) fetchBundle(ctx context.Context, st *bundleState) error {
	st.fetching.Lock()
	defer st.fetching.Unlock()
	u := strings.TrimSuffix(st.cfg.ServiceURL, "/") + "/" + strings.TrimPrefix(st.cfg.Resource, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("bundle request: %w", err)
	}
	st.mu.Lock()
	etag := st.etag
	st.mu.Unlock()
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	if st.cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+st.cfg.BearerToken)
	}
	resp, err := st.client.Do(req)
	if err != nil {
		return fmt.Errorf("bundle download: %w", err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil
	case http.StatusOK:
	default:
		return fmt.Errorf("bundle download: server answered %s", resp.Status)
	}
	r := bundleapi.NewReader(io.LimitReader(resp.Body, st.cfg.SizeLimitBytes+1)).
		WithBundleName(st.name()).
		WithBundleEtag(resp.Header.Get("ETag")).
		WithSizeLimitBytes(st.cfg.SizeLimitBytes).
		WithRegoVersion(ast.RegoV1)
	if st.vc != nil {
		r = r.WithBundleVerificationConfig(st.vc)
	}
	b, err := r.Read()
	if err != nil {
		return fmt.Errorf("bundle read: %w", err)
	}
	mods := make(map[string]string, len(b.Modules))
	for _, m := range b.Modules {
		if strings.HasSuffix(m.Path, "_test.rego") {
			continue
		}
		key := "bundle:" + m.Path
		if st.cfg.FullPolicy {
			key = "bundlefull:" + m.Path
		}
		mods[key] = string(m.Raw)
	}
	st.mu.Lock()
	prevMods, prevRev, prevTag := st.mods, st.revision, st.etag
	st.mods, st.revision, st.etag = mods, b.Manifest.Revision, resp.Header.Get("ETag")
	st.mu.Unlock()
	if err := e.load(ctx, "bundle"); err != nil {
		st.mu.Lock()
		st.mods, st.revision, st.etag = prevMods, prevRev, prevTag
		st.mu.Unlock()
		return err
	}
	return nil
}

func (e *Engine) uploadLogs(ctx context.Context, st *bundleState) {
	defer e.wg.Done()
	t := time.NewTicker(st.cfg.DecisionLogsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Last flush with a short deadline of its own: the engine is closing.
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = e.flushLogs(fctx, st)
			cancel()
			return
		case <-t.C:
			if err := e.flushLogs(ctx, st); err != nil {
				st.log.Warn("decision log upload failed", zap.Error(err))
			}
		}
	}
}

// FlushDecisionLogs uploads buffered decision logs now.
func (e *Engine) FlushDecisionLogs(ctx context.Context) error {
	st := e.bundle.Load()
	if st == nil || !st.cfg.DecisionLogs {
		return nil
	}
	return e.flushLogs(ctx, st)
}

func (e *Engine) flushLogs(ctx context.Context, st *bundleState) error {
	st.logMu.Lock()
	evs := st.events
	st.events = nil
	st.logMu.Unlock()
	if len(evs) == 0 {
		return nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(evs); err != nil {
		return fmt.Errorf("encode decision logs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress decision logs: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(st.cfg.ServiceURL, "/")+"/logs", &buf)
	if err != nil {
		return fmt.Errorf("decision log request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	if st.cfg.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+st.cfg.BearerToken)
	}
	resp, err := st.client.Do(req)
	if err != nil {
		st.requeue(evs)
		return fmt.Errorf("decision log upload: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		st.requeue(evs)
		return fmt.Errorf("decision log upload: server answered %s", resp.Status)
	}
	return nil
}

// requeue puts events back after a failed upload, within the buffer bound.
func (b *bundleState) requeue(evs []decisionEvent) {
	b.logMu.Lock()
	defer b.logMu.Unlock()
	room := maxBufferedEvents - len(b.events)
	if room <= 0 {
		return
	}
	if len(evs) > room {
		evs = evs[len(evs)-room:]
	}
	b.events = append(evs, b.events...)
}

func (e *Engine) report(trigger string, err error) {
	if e.cfg.OnReload == nil {
		return
	}
	d := e.Digest()
	e.cfg.OnReload(ReloadEvent{Trigger: trigger, Digest: d, Previous: d, Err: err, Time: time.Now()})
}
