package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// Approval is one question as the people who may answer it see it (the wire's fields), and
// what approving an edit writes.
type Approval struct {
	protocol.Approval
	// PreviewContents is what approving writes to each of AllPreviews' paths, and only while
	// each file still has its SHA256 (or is still absent); it never leaves the daemon.
	PreviewContents [][]byte `json:"-"`
	// AsAsked is the call's input as it runs, when redaction changed it for Input: who
	// answers must read what runs (a secret-looking assignment's value may be a command
	// substitution), and the secrets in it are the answerer's own. Nobody else gets it.
	AsAsked []byte `json:"-"`
	// Held is about the bytes the asker's waiting call holds besides its input (its command
	// parsed into words, its paths): the queue counts them as the approval's own.
	Held int `json:"-"`
	// Tenant is the uid whose bounds (MaxPendingPerOwner, MaxPendingBytesPerOwner) the
	// approval counts against, when it is not Owner: the owner of the subordinate uid range
	// Owner lies in, so a user's many uids share one set of bounds. 0: Owner's own.
	Tenant uint32 `json:"-"`
}

// tenant is the uid whose bounds a counts against.
func (a Approval) tenant() uint32 {
	if a.Tenant != 0 {
		return a.Tenant
	}
	return a.Owner
}

// Answer is a person's answer: Allow or Deny.
type Answer = string

// The two answers.
const (
	Allow Answer = protocol.Allow
	Deny  Answer = protocol.Deny
)

// Resolution is how an approval ended; By says who answered: "uid:N", "hook" or "expiry".
type Resolution = protocol.Resolution

// Event is one line of the approvals stream.
type Event struct {
	Type       string      `json:"type"` // created, answered, expired
	Approval   Approval    `json:"approval"`
	Resolution *Resolution `json:"resolution,omitempty"`
}

// MaxPendingPerOwner and MaxPendingBytesPerOwner bound one uid's approvals not yet taken, in
// number and in the bytes they hold (inputs, diffs and what approving writes): past either an
// ask is not queued (it stays an ask, nothing runs), so one user's agent cannot grow the
// daemon. By number alone, 256 pending Writes of 1 MB each grew it by 1.3 GB. An answered one
// counts until its call takes it or it expires: it holds the same call, and asks answered at
// once and never resumed would otherwise pile up without bound.
const (
	MaxPendingPerOwner      = 256
	MaxPendingBytesPerOwner = 32 << 20
)

// size is about what a holds in memory: its input twice (the redacted copy here, the
// asker's request in the payload), what the waiting call holds besides (Held), its diffs and
// what approving writes.
func (a Approval) size() int {
	n := 2*len(a.Input) + len(a.AsAsked) + len(a.Reason) + a.Held
	for _, p := range a.AllPreviews() {
		n += len(p.Diff)
	}
	for _, c := range a.PreviewContents {
		n += len(c)
	}
	return n
}

// subBuffer is how many events a stream may fall behind before it is cut off.
const subBuffer = 64

type entry struct {
	a       Approval
	payload any
	done    chan struct{}
	res     *Resolution
	// claimed: an answer (a person's, a hook's or the expiry) is being audited (Claim).
	claimed bool
}

// Sub is one stream of events.
type Sub struct {
	C      <-chan Event
	c      chan Event
	filter func(Approval) bool
	view   func(Approval) Approval
}

// Queue holds the pending approvals of every owner. Its zero value is not usable: NewQueue.
type Queue struct {
	mu      sync.Mutex
	entries map[string]*entry
	subs    map[*Sub]struct{}
}

// NewQueue returns an empty queue.
func NewQueue() *Queue {
	return &Queue{entries: map[string]*entry{}, subs: map[*Sub]struct{}{}}
}

func newID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error()) // the kernel's CSPRNG does not fail on Linux
	}
	return "ap_" + hex.EncodeToString(b[:])
}

// Add queues a for ttl; payload is the asker's (the pipeline's call state) and comes back
// with Take. It fills in ID, Created and Expires.
func (q *Queue) Add(a Approval, ttl time.Duration, payload any) (Approval, error) {
	now := time.Now().UTC()
	a.ID, a.Created, a.Expires = newID(), now, now.Add(ttl)
	if a.SuggestedRules == nil {
		a.SuggestedRules = []string{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n, bytes := q.ownerLoad(a)
	if n >= MaxPendingPerOwner {
		return Approval{}, fmt.Errorf("%w: uid %d has %d not yet taken (unanswered, or answered and not resumed); answer or resume some first, or wait for them to expire", ErrFull, a.tenant(), n)
	}
	if bytes > MaxPendingBytesPerOwner {
		return Approval{}, fmt.Errorf("%w: uid %d's approvals not yet taken would hold %d MiB, over %d MiB; answer or resume some first", ErrFull, a.tenant(), bytes>>20, MaxPendingBytesPerOwner>>20)
	}
	q.entries[a.ID] = &entry{a: a, payload: payload, done: make(chan struct{})}
	q.publish(Event{Type: "created", Approval: a})
	return a, nil
}

// ownerLoad is how many approvals a's owner (its tenant) has not yet taken, and their bytes
// with a's own added; q.mu is held.
func (q *Queue) ownerLoad(a Approval) (n, bytes int) {
	bytes = a.size()
	for _, e := range q.entries {
		if e.a.tenant() == a.tenant() {
			n++
			bytes += e.a.size()
		}
	}
	return n, bytes
}

// Room is how many bytes of previews a could still hold and be queued: what its owner's
// approvals not yet taken leave of MaxPendingBytesPerOwner past a itself, 0 when none (or when
// the owner has MaxPendingPerOwner already). A preview is built only within it: one bigger
// would be refused by Add after the daemon had read, edited and diffed the file for nothing.
func (q *Queue) Room(a Approval) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, bytes := q.ownerLoad(a)
	if n >= MaxPendingPerOwner || bytes >= MaxPendingBytesPerOwner {
		return 0
	}
	return MaxPendingBytesPerOwner - bytes
}

// Get returns an approval, answered or not, that has not been taken.
func (q *Queue) Get(id string) (Approval, *Resolution, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.entries[id]
	if !ok {
		return Approval{}, nil, false
	}
	return e.a, e.res, true
}

// Wait blocks until the approval is answered, d passes or ctx ends, and returns its
// resolution (nil when unanswered).
func (q *Queue) Wait(ctx context.Context, id string, d time.Duration) (*Resolution, error) {
	q.mu.Lock()
	e, ok := q.entries[id]
	q.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-e.done:
		case <-t.C:
		case <-ctx.Done():
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return e.res, nil
}

// Claim reserves an unanswered approval for one answer, checked by may under the queue's
// lock (false reports ErrNotFound). Until that answer is given (Resolve) or given up
// (Unclaim), every other Claim gets ErrAnswered: the answer is audited in between, so the log
// holds one answer per approval, the one that took effect, never a losing one beside it.
func (q *Queue) Claim(id string, may func(Approval) bool) (Approval, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.entries[id]
	if !ok || (may != nil && !may(e.a)) {
		return Approval{}, ErrNotFound
	}
	if e.res != nil || e.claimed {
		return Approval{}, ErrAnswered
	}
	e.claimed = true
	return e.a, nil
}

// Unclaim gives up a Claim whose answer was not given (it could not be audited).
func (q *Queue) Unclaim(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e, ok := q.entries[id]; ok && e.res == nil {
		e.claimed = false
	}
}

// Resolve answers a pending approval. may is checked under the queue's lock: false reports
// ErrNotFound (the caller may not see it).
func (q *Queue) Resolve(id string, res Resolution, may func(Approval) bool) (Approval, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.entries[id]
	if !ok || (may != nil && !may(e.a)) {
		return Approval{}, ErrNotFound
	}
	if e.res != nil {
		return Approval{}, ErrAnswered
	}
	if res.When.IsZero() {
		res.When = time.Now().UTC()
	}
	e.res = &res
	close(e.done)
	typ := "answered"
	if res.By == "expiry" {
		typ = "expired"
	}
	q.publish(Event{Type: typ, Approval: e.a, Resolution: &res})
	return e.a, nil
}

// Take removes an answered approval and returns its payload and resolution, once: the call
// it holds runs at most once. An unanswered one is left alone (ok false).
// Payload is what the asker gave Add for id, which stays queued: a look before Take.
func (q *Queue) Payload(id string) (any, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, found := q.entries[id]
	if !found {
		return nil, false
	}
	return e.payload, true
}

func (q *Queue) Take(id string) (payload any, res *Resolution, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	e, found := q.entries[id]
	if !found || e.res == nil {
		return nil, nil, false
	}
	delete(q.entries, id)
	return e.payload, e.res, true
}

// Pending lists the unanswered approvals keep accepts, oldest first.
func (q *Queue) Pending(keep func(Approval) bool) []Approval {
	q.mu.Lock()
	out := []Approval{}
	for _, e := range q.entries {
		if e.res == nil && (keep == nil || keep(e.a)) {
			out = append(out, e.a)
		}
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Expired lists the unanswered approvals past their expiry, oldest first, and drops answered
// ones nobody took by then (their caller gave up).
func (q *Queue) Expired(now time.Time) []Approval {
	var out []Approval
	q.mu.Lock()
	for id, e := range q.entries {
		if now.Before(e.a.Expires) {
			continue
		}
		if e.res != nil {
			delete(q.entries, id)
			continue
		}
		if e.claimed {
			continue // being answered: that answer decides it
		}
		out = append(out, e.a)
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// ExpiryDenial is what an approval nobody answered in time gets: a deny, never an allow.
func ExpiryDenial(a Approval) Resolution {
	msg := fmt.Sprintf("approval expired after %s with no answer; denied", a.Expires.Sub(a.Created).Round(time.Second))
	return Resolution{Answer: Deny, Message: msg, By: "expiry"}
}

// Subscribe streams the events of approvals keep accepts, each approval as view shows it to
// this subscriber (nil: as it is). A subscriber that falls subBuffer events behind is cut off
// (its channel closes) rather than slowing the queue.
func (q *Queue) Subscribe(keep func(Approval) bool, view func(Approval) Approval) (*Sub, func()) {
	c := make(chan Event, subBuffer)
	s := &Sub{C: c, c: c, filter: keep, view: view}
	q.mu.Lock()
	q.subs[s] = struct{}{}
	q.mu.Unlock()
	return s, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if _, ok := q.subs[s]; ok {
			delete(q.subs, s)
			close(s.c)
		}
	}
}

// publish sends ev to its subscribers; q.mu is held.
func (q *Queue) publish(ev Event) {
	for s := range q.subs {
		if s.filter != nil && !s.filter(ev.Approval) {
			continue
		}
		sev := ev
		if s.view != nil {
			sev.Approval = s.view(ev.Approval)
		}
		select {
		case s.c <- sev:
		default:
			delete(q.subs, s)
			close(s.c)
		}
	}
}

// DropSession denies with res the unanswered approvals of a deleted session (asked by it or
// queued for it), nobody can run their calls any more, and returns them so the denial can be
// audited as any other answer is. One being answered (claimed) is left to that answer: the
// answer is already in the log, and its call cannot run in a deleted session.
func (q *Queue) DropSession(id string, res Resolution) []Approval {
	if res.When.IsZero() {
		res.When = time.Now().UTC()
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Approval
	for aid, e := range q.entries {
		if e.a.Session != id && e.a.ParentSession != id {
			continue
		}
		switch {
		case e.res != nil:
			delete(q.entries, aid)
		case !e.claimed:
			r := res
			e.res = &r
			close(e.done)
			q.publish(Event{Type: "answered", Approval: e.a, Resolution: &r})
			delete(q.entries, aid)
			out = append(out, e.a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}
