package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/internal/errcode"
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

// approvalsBackend holds one user's pending approvals of about a MiB each.
type approvalsBackend struct {
	decider
	as []approval.Approval
}

func (b approvalsBackend) Approvals(session.Caller) []approval.Approval { return b.as }

// SubscribeApprovals is a stream with no events after the pending ones: closed at once.
func (b approvalsBackend) SubscribeApprovals(session.Caller) (*approval.Sub, func()) {
	c := make(chan approval.Event)
	close(c)
	return &approval.Sub{C: c}, func() {}
}

// TestApprovalsListIsPacedBySize: listing approvals takes a request token, and a token per MiB
// written after the fact, so looping on a long list from many connections runs out of tokens
// in a few lists (429) instead of keeping the daemon encoding tens of MB for each.
func TestApprovalsListIsPacedBySize(t *testing.T) {
	var as []approval.Approval
	for i := range 8 {
		a := approval.Approval{}
		a.ID = fmt.Sprintf("ap_%d", i)
		in, _ := json.Marshal(map[string]string{"content": strings.Repeat("\x01", 200<<10)}) // ~1.2 MiB escaped
		a.Input = in
		as = append(as, a)
	}
	s := NewServer(zaptest.NewLogger(t), approvalsBackend{as: as}, 1<<20, prometheus.NewRegistry())
	l := s.tenants.get()
	l.RequestsPerSecond, l.Burst = 0.001, 40 // no refill to speak of while the test runs
	s.SetLimits(l)
	list := func(uid uint32) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/v1/approvals", nil)
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, Peer{UID: uid}))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	rec := list(4242)
	var got protocol.ApprovalList
	if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil || len(got.Approvals) != 8 || got.Approvals[7].ID != "ap_7" {
		t.Fatalf("list: %d %v %d approvals %.300s", rec.Code, err, len(got.Approvals), rec.Body)
	}
	lists := 1
	for ; lists < 100 && list(4242).Code == http.StatusOK; lists++ {
	}
	// A list of ~10 MiB costs about 10 tokens, so a bucket of 40 serves 4 (the last into debt).
	if lists != 4 {
		t.Errorf("%d lists of ~10 MiB in a row were served from a bucket of 40 tokens; want 4", lists)
	}
	if rec := list(0); rec.Code != http.StatusOK {
		t.Errorf("root is not paced: %d", rec.Code)
	}
	// At once, from 32 connections: each list takes its size's tokens before it is written,
	// so a full bucket serves as many as in a row. Charged only after, all 32 passed the
	// one-token check together.
	var served atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if list(4444).Code == http.StatusOK {
				served.Add(1)
			}
		})
	}
	wg.Wait()
	if n := served.Load(); n > 4 {
		t.Errorf("%d lists of ~10 MiB at once were served from a bucket of 40 tokens; want at most 4", n)
	}
	// The stream replays the pending approvals first: paced the same way.
	stream := func(uid uint32) int {
		req := httptest.NewRequest("GET", "/v1/approvals/stream", nil)
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, Peer{UID: uid}))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec.Code
	}
	streams := 0
	for ; streams < 100 && stream(4343) == http.StatusOK; streams++ {
	}
	if streams != 4 {
		t.Errorf("%d streams replaying ~10 MiB each were opened from a bucket of 40 tokens; want 4", streams)
	}
}

// countingReader counts what was read of it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// noApprovals is a decider with no approval to answer.
type noApprovals struct{ decider }

func (noApprovals) AnswerApproval(context.Context, session.Caller, string, protocol.ApprovalAnswer) (approval.Approval, approval.Resolution, error) {
	return approval.Approval{}, approval.Resolution{}, errcode.Msg(errcode.NotFound, "no such approval")
}

// TestBodyIsPacedAsRead: every request takes a token, and its body its own as it is read, on
// every route, so a user whose bucket is low cannot make the daemon read (and hold) more than
// its tokens pay for. Taken after the decode, and not at all on an approval's answer, 32
// connections of 1 MiB answers took the daemon's RSS from 60 to ~290 MB.
func TestBodyIsPacedAsRead(t *testing.T) {
	s := NewServer(zaptest.NewLogger(t), noApprovals{}, 1<<20, prometheus.NewRegistry())
	l := s.tenants.get()
	l.RequestsPerSecond, l.Burst = 0.001, 10 // no refill to speak of while the test runs
	s.SetLimits(l)
	// send sends body, of a known length unless chunked, and reports how much of it was read.
	send := func(uid uint32, target, body string, chunked bool) (*httptest.ResponseRecorder, int) {
		in := &countingReader{r: strings.NewReader(body)}
		req := httptest.NewRequest("POST", target, in)
		req.ContentLength = int64(len(body))
		if chunked {
			req.ContentLength = -1
		}
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, Peer{UID: uid}))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec, in.n
	}
	answer := fmt.Sprintf(`{"answer":"deny","message":%q}`, strings.Repeat("a", 1000<<10))
	small := `{"answer":"deny"}`
	// From a full bucket a body takes at most the burst less its request's own token: read
	// whole.
	rec, read := send(4242, "/v1/approvals/ap_x", answer, false)
	if rec.Code != http.StatusNotFound || read != len(answer) {
		t.Fatalf("a 1000 KiB answer from a full bucket: %d, %d of %d bytes read: %.300s", rec.Code, read, len(answer), rec.Body)
	}
	// With six tokens left, the request takes one and its body of known length, wanting nine,
	// is refused unread, having taken none: the next small request still passes.
	for range 4 {
		send(4343, "/v1/approvals/ap_x", small, false)
	}
	rec, read = send(4343, "/v1/approvals/ap_x", answer, false)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "rate_limited") {
		t.Fatalf("a 1000 KiB answer from a bucket of six tokens: %d %.300s", rec.Code, rec.Body)
	}
	if read != 0 {
		t.Errorf("the daemon read %d bytes of a body of known length its sender had too few tokens for", read)
	}
	if rec, _ := send(4343, "/v1/approvals/ap_x", small, false); rec.Code != http.StatusNotFound {
		t.Errorf("a small answer after a refused big one: %d %.300s", rec.Code, rec.Body)
	}
	// Sent in chunks (no length), a body is read as far as its tokens pay, a token's read
	// past them at most: three tokens here, 8 KiB each past the first 8.
	rec, read = send(4343, "/v1/approvals/ap_x", answer, true)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "rate_limited") {
		t.Fatalf("a 1000 KiB answer in chunks from a bucket of four tokens: %d %.300s", rec.Code, rec.Body)
	}
	if read > 48<<10 {
		t.Errorf("the daemon read %d KiB of a chunked body its sender had three tokens for; want at most 48", read>>10)
	}
	// An empty bucket refuses the request itself, its body unread.
	if rec, read := send(4242, "/v1/approvals/ap_x", small, false); rec.Code != http.StatusTooManyRequests || read != 0 {
		t.Errorf("an answer from an empty bucket: %d, %d bytes read", rec.Code, read)
	}
	// Root is not paced.
	for range 3 {
		if rec, read := send(0, "/v1/approvals/ap_x", answer, false); rec.Code != http.StatusNotFound || read != len(answer) {
			t.Fatalf("root's 1000 KiB answer: %d, %d bytes read: %.300s", rec.Code, read, rec.Body)
		}
	}
}

// TestBatchIsRefusedAtItsFirstCallPastTheLimit: a batch's calls are decoded one at a time and
// the batch is refused at the first past limits.batch_calls. Decoded whole, 349 000 empty
// calls (a 1 MiB body) made the daemon allocate ~294 MiB before their number was checked.
func TestBatchIsRefusedAtItsFirstCallPastTheLimit(t *testing.T) {
	s := NewServer(zaptest.NewLogger(t), decider{}, 1<<20, prometheus.NewRegistry())
	body := `{"calls":[` + strings.Repeat(`{},`, 300_000) + `{}]}`
	send := func(body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v1/sessions/s_x/batch", strings.NewReader(body))
		req = req.WithContext(context.WithValue(req.Context(), peerKey{}, Peer{UID: 0}))
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		return rec
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rec := send(body)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "at most 64 calls") {
		t.Fatalf("a batch of 300 001 calls: %d %.300s", rec.Code, rec.Body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("refusing a batch of 300 001 empty calls allocated %d MiB; want a few", alloc>>20)
	}
	for body, want := range map[string]string{
		`{"calls":[{}],"x":1}`:    "unknown or repeated field",
		`{"calls":[],"calls":[]}`: "unknown or repeated field",
		`{"calls":[{"tol":1}]}`:   "unknown field",
		`{"calls":[]} {}`:         "trailing data",
		`{"calls":{}}`:            "want [",
		`{}`:                      "is empty: send at least one call",
	} {
		if rec := send(body); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("batch %s: %d %.300s; want 400 saying %q", body, rec.Code, rec.Body, want)
		}
	}
}
