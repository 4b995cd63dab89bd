package api

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// Backend is what the handlers need of the daemon.
type Backend interface {
	Identify(p Peer) (session.Caller, error)
	Health(caller session.Caller) protocol.Health
	CreateSession(ctx context.Context, caller session.Caller, p session.Params) (session.Snapshot, error)
	// Session is the session to act in (its owner's, or root's); SessionView one to look at
	// (also an admin's).
	Session(caller session.Caller, id string) (*session.Session, error)
	SessionView(caller session.Caller, id string) (*session.Session, error)
	Sessions(caller session.Caller) []session.Snapshot
	UpdateSession(ctx context.Context, caller session.Caller, id string, u session.Update) (session.Snapshot, error)
	DeleteSession(ctx context.Context, caller session.Caller, id string) error
	// Call runs one call in s, handing its progress to onEvent when set and charging its
	// result to b; Decide only decides it; Resume finishes the call a pending approval holds,
	// waiting up to wait for the answer; Batch runs reqs, every one checked before any runs.
	// An error is a request refused before its decision (malformed, unknown approval); all
	// else is in the Outcome.
	Call(ctx context.Context, s *session.Session, caller session.Caller, req protocol.CallRequest, onEvent func(protocol.Event), b Budget) (Outcome, error)
	Decide(ctx context.Context, s *session.Session, caller session.Caller, req protocol.CallRequest) (Outcome, error)
	Resume(ctx context.Context, s *session.Session, caller session.Caller, approvalID string, wait time.Duration, b Budget) (Outcome, error)
	Batch(ctx context.Context, s *session.Session, caller session.Caller, reqs []protocol.CallRequest, b Budget) ([]Outcome, error)
	// Tools is the tool pool, for sessionID's rules when it is not empty.
	Tools(caller session.Caller, sessionID string) ([]protocol.ToolInfo, error)
	Tasks(s *session.Session) []map[string]any
	AuditDir() string
	AuditCheckpoint(ctx context.Context) error
	AuditPublicKey() ed25519.PublicKey
	// Policy is the policy in force (digest and modules).
	Policy() protocol.Policy
	// Report records what the agent says a call in session s did.
	Report(ctx context.Context, s *session.Session, caller session.Caller, r protocol.ToolReport) error
	// Approvals are the caller's pending approvals (every one for admins);
	// SubscribeApprovals streams their events; AnswerApproval answers one (its queue
	// session's owner, or root).
	Approvals(caller session.Caller) []approval.Approval
	SubscribeApprovals(caller session.Caller) (*approval.Sub, func())
	AnswerApproval(ctx context.Context, caller session.Caller, id string, a protocol.ApprovalAnswer) (approval.Approval, approval.Resolution, error)
}

// Outcome is one call as the API answers it.
type Outcome struct {
	Result protocol.CallResult
	// Ran says the call got past its decision: an error is then the call's, not the request's.
	Ran bool
}

// Budget is one response's room in its user's share of limits.response_bytes. The backend
// charges each result to it as the result is done, and shrinks one that does not fit.
type Budget interface {
	// Fits reports whether n more bytes fit.
	Fits(n int64) bool
	// Charge counts n bytes, fitting or not: a shrunk result is small and always let through,
	// so every call of a batch gets an answer.
	Charge(n int64)
	// Limit is what a shrunk result is cut to.
	Limit() int64
	// Room is what is left before the limit (<= 0: nothing): a call that would fill more
	// leaves its bulk out before it reads it.
	Room() int64
}

// Server is the HTTP handler of the socket.
type Server struct {
	log      *zap.Logger
	backend  Backend
	maxBody  int64
	mux      *http.ServeMux
	metrics  *metrics
	inflight sync.WaitGroup
	// tenants holds the per-user limits and what each uid holds of them (limits.go).
	tenants tenants
	// peerCgroups: read each peer's cgroups at accept (SetPeerCgroups).
	peerCgroups atomic.Bool
	// tenantOfUID maps a peer's uid to its tenant's (SetTenantOf); nil: itself.
	tenantOfUID func(uid uint32) uint32
}

// NewServer builds the handler. maxBody bounds request bodies (413 past it).
func NewServer(log *zap.Logger, b Backend, maxBody int64, reg *prometheus.Registry) *Server {
	s := &Server{log: log.Named("api"), backend: b, maxBody: maxBody, mux: http.NewServeMux(), metrics: newMetrics(reg)}
	routes := []struct {
		pattern string
		h       func(w http.ResponseWriter, r *http.Request, c session.Caller) error
	}{
		{"GET /v1/healthz", s.health},
		{"GET /v1/tools", s.tools},
		{"POST /v1/sessions", s.createSession},
		{"GET /v1/sessions", s.listSessions},
		{"GET /v1/sessions/{id}", s.getSession},
		{"PATCH /v1/sessions/{id}", s.updateSession},
		{"DELETE /v1/sessions/{id}", s.deleteSession},
		{"POST /v1/sessions/{id}/calls", s.call},
		{"POST /v1/sessions/{id}/batch", s.batch},
		{"POST /v1/sessions/{id}/decide", s.decide},
		{"POST /v1/sessions/{id}/reports", s.report},
		{"GET /v1/sessions/{id}/rules", s.sessionRules},
		{"GET /v1/sessions/{id}/tasks", s.sessionTasks},
		{"GET /v1/approvals", s.listApprovals},
		{"GET /v1/approvals/stream", s.streamApprovals},
		{"POST /v1/approvals/{id}", s.answerApproval},
		{"GET /v1/audit/records", s.auditRecords},
		{"GET /v1/audit/verify", s.auditVerify},
		{"GET /v1/audit/pubkey", s.auditPubkey},
		{"GET /v1/policy", s.policy},
	}
	for _, rt := range routes {
		s.mux.Handle(rt.pattern, s.wrap(rt.pattern, rt.h))
	}
	metricsHandler := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	s.mux.Handle("GET /v1/metrics", s.wrap("GET /v1/metrics", func(w http.ResponseWriter, r *http.Request, c session.Caller) error {
		if !c.Admin {
			return errcode.Msg(errcode.PermissionDenied, "metrics are for admins (root or the admin group)")
		}
		metricsHandler.ServeHTTP(w, r)
		return nil
	}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errBody(errcode.NotFound, fmt.Sprintf("no route for %s %s; the API lives under /%s/", r.Method, r.URL.Path, protocol.Version)))
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Wait blocks until every in-flight handler has returned.
func (s *Server) Wait() { s.inflight.Wait() }

// wrap identifies the caller, limits the body, recovers panics and turns errors into JSON.
func (s *Server) wrap(route string, h func(http.ResponseWriter, *http.Request, session.Caller) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		sw := &statusWriter{ResponseWriter: w, extend: func() { s.extendWrite(w) }}
		sw.extend()
		defer sw.extend() // the server's final flush too
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.metrics.panics.Inc()
				s.log.Error("panic in handler", zap.String("route", route), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
				if !sw.wrote {
					writeJSON(sw, http.StatusInternalServerError, errBody(errcode.Internal, "internal error; the daemon logged it and keeps serving"))
				}
			}
			s.metrics.requests.WithLabelValues(route, fmt.Sprint(sw.status())).Inc()
		}()
		peer, err := PeerFrom(r.Context())
		if err != nil {
			writeJSON(sw, http.StatusUnauthorized, errBody(errcode.PermissionDenied, "connect over the Unix socket: the caller is identified by its peer credentials"))
			return
		}
		caller, err := s.backend.Identify(peer)
		if err != nil {
			writeJSON(sw, http.StatusForbidden, errBody(errcode.PermissionDenied, err.Error()))
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.maxBody)
		// Every request but the health check takes a token of its caller's rate before
		// anything else, so no route is one a user can loop on at the daemon's cost (lists of
		// a session's rules, approvals' answers); its body pays for itself as it is read.
		if route != "GET /v1/healthz" {
			if err := s.limitRate(r.Context(), caller, 1); err != nil {
				s.writeError(sw, err)
				return
			}
		}
		s.pace(r, caller)
		if err := h(sw, r, caller); err != nil {
			s.writeError(sw, err)
		}
	})
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		s.metrics.refusals.WithLabelValues(string(errcode.TooLarge), "max_request_bytes").Inc()
		writeJSON(w, http.StatusRequestEntityTooLarge, errBody(errcode.TooLarge, fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit)))
	case errors.Is(err, session.ErrNotFound):
		writeJSON(w, http.StatusNotFound, errBody(errcode.NotFound, "session not found"))
	default:
		code := errcode.Of(err)
		if limit, ok := refusedBy(code, err.Error()); ok {
			s.metrics.refusals.WithLabelValues(string(code), limit).Inc()
		}
		writeJSON(w, statusFor(code), errBody(code, err.Error()))
	}
}

// statusFor maps a code to its HTTP status.
func statusFor(code errcode.Code) int {
	switch code {
	case errcode.BadRequest:
		return http.StatusBadRequest
	case errcode.SchemaInvalid, errcode.Validation:
		return http.StatusUnprocessableEntity
	case errcode.UnknownTool, errcode.NotFound:
		return http.StatusNotFound
	case errcode.TooLarge:
		return http.StatusRequestEntityTooLarge
	case errcode.PermissionDenied:
		return http.StatusForbidden
	case errcode.Conflict:
		return http.StatusConflict
	case errcode.TooManyCalls, errcode.RateLimited:
		return http.StatusTooManyRequests
	case errcode.AuditUnavailable, errcode.Unavailable, errcode.PolicyNotLoaded:
		return http.StatusServiceUnavailable
	case errcode.Cancelled:
		return 499
	case errcode.Timeout:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err)
	}
	return decodeEnd(dec)
}

// decodeEnd checks that nothing follows the object dec read.
func decodeEnd(dec *json.Decoder) error {
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && keepBodyError(err) {
			return err
		}
		return errcode.Msg(errcode.BadRequest, "malformed JSON body: trailing data after the object")
	}
	return nil
}

// bodyError is the error of reading a body's JSON: what the body's reader refused (its size,
// its sender's rate) as it is, anything else a bad request.
func bodyError(err error) error {
	if keepBodyError(err) {
		return err
	}
	if errors.Is(err, io.EOF) {
		return errcode.Msg(errcode.BadRequest, "empty request body; send a JSON object")
	}
	return errcode.New(errcode.BadRequest, fmt.Errorf("malformed JSON body: %w", err))
}

// keepBodyError reports whether err is the body reader's own refusal: over max_request_bytes
// (413) or over the sender's rate (pacedBody, 429).
func keepBodyError(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe) || errcode.Of(err) == errcode.RateLimited
}

// decodeBatch reads a batch's calls one at a time, and refuses the batch at the first call
// past max: decoded whole, a 1 MiB body of 349 000 empty calls made the daemon allocate ~294
// MiB before their number was checked.
func decodeBatch(r *http.Request, max int) ([]protocol.CallRequest, error) {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	delim := func(want json.Delim) error {
		tok, err := dec.Token()
		if err != nil {
			return bodyError(err)
		}
		if tok != want {
			return errcode.New(errcode.BadRequest, fmt.Errorf("malformed JSON body: want %v, found %v", want, tok))
		}
		return nil
	}
	if err := delim('{'); err != nil {
		return nil, err
	}
	var calls []protocol.CallRequest
	seen := false
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, bodyError(err)
		}
		if key != "calls" || seen {
			return nil, errcode.New(errcode.BadRequest, fmt.Errorf("malformed JSON body: unknown or repeated field %q; a batch is {\"calls\": [...]}", key))
		}
		seen = true
		if err := delim('['); err != nil {
			return nil, err
		}
		for dec.More() {
			if len(calls) == max {
				return nil, errcode.New(errcode.BadRequest, fmt.Errorf("a batch may hold at most %d calls (limits.batch_calls) and this one has more; split it", max))
			}
			var cr protocol.CallRequest
			if err := dec.Decode(&cr); err != nil {
				return nil, bodyError(err)
			}
			calls = append(calls, cr)
		}
		if err := delim(']'); err != nil {
			return nil, err
		}
	}
	if err := delim('}'); err != nil {
		return nil, err
	}
	return calls, decodeEnd(dec)
}

// writeCallResult writes a call's result as the response, its big data without stalling
// other requests (writeResult).
func writeCallResult(w http.ResponseWriter, status int, r protocol.CallResult) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if writeResult(w, &r) == nil {
		_, _ = io.WriteString(w, "\n")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeBatch writes a protocol.BatchResponse one result at a time. Encoded whole, a response
// of tens of MB grew one buffer through every size up to its own, and each fresh page was a
// fault taken while holding the daemon's P: every other user's requests waited behind one
// user's batch of images for hundreds of milliseconds.
func writeBatch(w http.ResponseWriter, results []protocol.CallResult) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, `{"results":[`); err != nil {
		return
	}
	for i, r := range results {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return
			}
		}
		if err := writeResult(w, &r); err != nil {
			return
		}
		if _, err := io.WriteString(w, "\n"); err != nil {
			return
		}
	}
	_, _ = io.WriteString(w, "]}\n")
}

// writeApprovals writes a protocol.ApprovalList one approval at a time, so a request holds
// one approval's encoding rather than the whole list's; it returns the bytes written.
func writeApprovals(w http.ResponseWriter, as []protocol.Approval) int64 {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	cw := &countingWriter{w: w}
	enc := json.NewEncoder(cw)
	enc.SetEscapeHTML(false)
	if _, err := io.WriteString(cw, `{"approvals":[`); err != nil {
		return cw.n
	}
	for i := range as {
		if i > 0 {
			if _, err := io.WriteString(cw, ","); err != nil {
				return cw.n
			}
		}
		if err := enc.Encode(&as[i]); err != nil {
			return cw.n
		}
	}
	_, _ = io.WriteString(cw, "]}\n")
	return cw.n
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
	// extend moves the write deadline on before each write (Limits.WriteTimeout).
	extend func()
}

func (w *statusWriter) WriteHeader(code int) {
	w.extend()
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.extend()
	if !w.wrote {
		w.code, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	w.extend()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) status() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.code
}

type metrics struct {
	requests *prometheus.CounterVec
	panics   prometheus.Counter
	calls    *prometheus.CounterVec
	// refusals counts requests and connections refused by a per-user or per-request limit.
	refusals *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "status"}),
		panics:   prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxd_handler_panics_total", Help: "Panics recovered in handlers."}),
		calls:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_calls_total", Help: "Tool calls by tool, behavior and error code."}, []string{"tool", "behavior", "code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxd_limit_refusals_total", Help: "Requests and connections refused by a limit, by error code and the limit's config key."}, []string{"code", "limit"}),
	}
	reg.MustRegister(m.requests, m.panics, m.calls, m.refusals)
	return m
}

func (s *Server) countCall(o Outcome) {
	r := o.Result
	behavior := "none"
	if r.Decision != nil {
		behavior = r.Decision.Behavior
	}
	code := string(errcode.OK)
	if r.Error != nil {
		code = r.Error.Class
	}
	tool := r.Tool
	if r.Decision == nil && r.Error != nil && errcode.Code(r.Error.Class) == errcode.UnknownTool {
		tool = "unknown" // never let client text become a metric label
	}
	s.metrics.calls.WithLabelValues(tool, behavior, code).Inc()
}
