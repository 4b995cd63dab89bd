package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/permission"
)

// Caller is who the kernel says sent a request (SO_PEERCRED), plus what the daemon looked up.
type Caller struct {
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	PID    int32    `json:"pid"`
	Groups []uint32 `json:"groups,omitempty"`
	User   string   `json:"user,omitempty"`
	Home   string   `json:"home,omitempty"`
	// Admin is true for root and members of the configured admin group.
	Admin bool `json:"admin,omitempty"`
	// RangeOwner is the user, other than root, whose subordinate uid range (/etc/subuid) holds
	// UID: the caller runs in a user namespace that user made. 0 when none.
	RangeOwner uint32 `json:"range_owner,omitempty"`
}

// Tenant is the uid whose per-user limits the caller counts against: its range owner's for a
// subordinate uid (a user may map tens of thousands of them, each of which would otherwise
// bring a full set of limits of its own), else its own.
func (c Caller) Tenant() uint32 {
	if c.RangeOwner != 0 {
		return c.RangeOwner
	}
	return c.UID
}

// TenantName names Tenant for a refusal: "uid N", and the subordinate uid when there is one.
func (c Caller) TenantName() string {
	if c.RangeOwner != 0 {
		return fmt.Sprintf("uid %d (for its subordinate uid %d)", c.RangeOwner, c.UID)
	}
	return fmt.Sprintf("uid %d", c.UID)
}

// Rules are the allow/deny/ask rule texts a session carries (source "session").
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	Ask   []string `json:"ask,omitempty"`
}

// Session is one agent's context on the daemon. Its identity fields never change after
// creation; mutable state is behind mu and read through methods.
type Session struct {
	ID       string
	Owner    Caller
	ParentID string
	Created  time.Time
	// TrustProject lets the project's settings files allow, not only deny and ask.
	TrustProject bool
	// PersistCwd makes a Bash `cd` inside the session's directories carry over to later calls.
	PersistCwd bool
	// Network is the session's egress: none, proxy or host. Fixed at creation.
	Network string
	// ClientKey is what its client made it for; a call naming another key does not reach it.
	ClientKey string
	// Disposable: its client makes it again when it is gone, so it may be ended to make
	// room for its owner's next session (protocol.CreateSession.Disposable).
	Disposable bool
	// Umask is the file mode creation mask its calls run with: its creator's, as a program
	// the creator ran itself would have. Fixed at creation.
	Umask uint32
	// Root is the cwd the session was created with: its project (whose settings apply) and
	// its first directory. A later cwd, persisted or set through the API, lies inside the
	// session's directories and changes neither.
	Root string
	// RulesMu serializes what reads the session's rules and sets its rule set (a change of its
	// own, a rebuild after a reload or after its parent's change), so the rule set in force is
	// built from the rules last applied. An ancestor's is taken before a descendant's.
	RulesMu sync.Mutex

	mu             sync.Mutex
	cwd            string
	additionalDirs []string
	mode           permission.Mode
	rules          Rules
	closed         bool
	// leadsTo is where each of the session's dirs led, resolved as the owner, when it was
	// given (LeadsTo).
	leadsTo map[string]string
	// homeLeadsTo is where the owner's home led, resolved as the owner, when the session
	// was made (HomeLeadsTo).
	homeLeadsTo string
	// prePlan is the mode EnterPlanMode left for plan mode, which ExitPlanMode returns to; any
	// other change of mode forgets it, so an approved ExitPlanMode never restores a mode its
	// owner has since left.
	prePlan permission.Mode
	// running are the tool_use_ids of the calls of the session that are running
	// (ClaimToolUseID).
	running map[string]bool
	// lifetime is cancelled when the session is removed (Lifetime); made on first use.
	lifetime    context.Context
	endLifetime context.CancelFunc

	// narrowings counts the changes that took something away (MarkNarrowed).
	narrowings atomic.Uint64

	// ruleSet is the loaded rules of every source; swapped whole when rules change.
	ruleSet atomic.Pointer[permission.RuleSet]
	// suspended holds why the session's rules could not be rebuilt: every call is denied
	// with it until a rebuild succeeds (never the old rules, which may be looser).
	suspended atomic.Pointer[string]

	// Parent is the session this one was created under (nil for a top-level session). A
	// child reads its parent's mode to bound its own and routes bubbled asks to it; it never
	// changes it.
	Parent *Session
	// Denials counts auto mode's classifier denials (its own, never the parent's).
	Denials Denials
	// History is the session's last calls, for auto mode's classifier.
	History History

	// Reads is the read-file state used by Write and Edit staleness checks.
	Reads *ReadState
	// Budget tracks the aggregate size of results returned to the agent.
	Budget *Budget
}

// Snapshot is a consistent copy of a session's mutable state.
type Snapshot struct {
	ID             string          `json:"id"`
	Owner          Caller          `json:"owner"`
	ParentID       string          `json:"parent_id,omitempty"`
	Created        time.Time       `json:"created"`
	Root           string          `json:"root"`
	Cwd            string          `json:"cwd"`
	AdditionalDirs []string        `json:"additional_dirs"`
	Mode           permission.Mode `json:"mode"`
	Rules          Rules           `json:"rules"`
	PersistCwd     bool            `json:"persist_cwd,omitempty"`
	TrustProject   bool            `json:"trust_project,omitempty"`
	Network        string          `json:"network,omitempty"`
}

// NewID returns a random session id.
func NewID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error()) // the kernel's CSPRNG does not fail on Linux
	}
	return "s_" + hex.EncodeToString(b[:])
}

// Snapshot copies the session's current state.
func (s *Session) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Snapshot{
		ID: s.ID, Owner: s.Owner, ParentID: s.ParentID, Created: s.Created, Root: s.Root,
		Cwd: s.cwd, AdditionalDirs: append([]string(nil), s.additionalDirs...),
		Mode: s.mode, Rules: copyRules(s.rules), PersistCwd: s.PersistCwd, TrustProject: s.TrustProject, Network: s.Network,
	}
}

// Mode returns the session's current mode.
func (s *Session) Mode() permission.Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mode
}

// PrePlan returns the mode the session left when EnterPlanMode put it in plan mode, "" when
// it is not in plan mode that way (created in plan, or set to plan by its owner).
func (s *Session) PrePlan() permission.Mode {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.prePlan
}

// ClaimToolUseID marks id as a running call's, until release; false when a running call of
// the session already has it. The audit log pairs a call's start with its end by the id: two
// running at once under one id would let the end of one stand for the other's, and a call cut
// short by a crash would read as finished.
func (s *Session) ClaimToolUseID(id string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] {
		return nil, false
	}
	if s.running == nil {
		s.running = map[string]bool{}
	}
	s.running[id] = true
	return func() {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
	}, true
}

// Cwd returns the session's working directory.
func (s *Session) Cwd() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cwd
}

// SetLeadsTo records where dir, one of the session's, leads now (resolved as the owner).
func (s *Session) SetLeadsTo(dir, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leadsTo == nil {
		s.leadsTo = map[string]string{}
	}
	s.leadsTo[dir] = to
}

// LeadsTo is where each of the session's dirs led when it was given: a dir that leads
// elsewhere now was replaced by a link since (`mv proj proj.old && ln -s ~other proj`), and
// its calls would run and read outside what they are decided for.
func (s *Session) LeadsTo() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.leadsTo))
	for _, d := range append([]string{s.Root}, s.additionalDirs...) {
		if to, ok := s.leadsTo[d]; ok {
			out[d] = to
		}
	}
	return out
}

// SetHomeLeadsTo records where the owner's home leads (resolved as the owner).
func (s *Session) SetHomeLeadsTo(to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.homeLeadsTo = to
}

// HomeLeadsTo is where the owner's home led when the session was made, "" when not known: a
// rule anchored at a home that is a link (~/x for /home/c -> /home/c_real) holds where it
// leads too.
func (s *Session) HomeLeadsTo() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.homeLeadsTo
}

// Dirs returns the root followed by the additional directories: the session's workspace,
// which a change of cwd never widens (nor narrows).
func (s *Session) Dirs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{s.Root}, s.additionalDirs...)
}

// Inside reports whether the clean absolute path p is one of the session's directories or
// lies below one.
func (s *Session) Inside(p string) bool {
	for _, d := range s.Dirs() {
		if Within(p, d) {
			return true
		}
	}
	return false
}

// Within reports whether the clean absolute path p is d or lies below it.
func Within(p, d string) bool {
	return p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/")
}

// Denials tracks auto mode's classifier denials: past maxConsecutive in a row or maxTotal in
// all, the session's asks go to a person instead of the classifier.
type Denials struct {
	mu          sync.Mutex
	consecutive int
	total       int
}

// Denial-tracking thresholds of auto mode.
const (
	MaxConsecutiveDenials = 3
	MaxTotalDenials       = 20
)

// Record counts one classifier verdict: a deny, or anything else (which ends a streak).
func (d *Denials) Record(denied bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !denied {
		d.consecutive = 0
		return
	}
	d.consecutive++
	d.total++
}

// Exhausted reports whether the classifier has denied often enough that a person decides.
func (d *Denials) Exhausted() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.consecutive >= MaxConsecutiveDenials || d.total >= MaxTotalDenials
}

// EffectiveMode is the mode whose rank bounds the session: its own, or for bubble the first
// ancestor's that is not bubble (bubble counts as its parent's). A bubble session without a
// parent counts as default.
func (s *Session) EffectiveMode() permission.Mode {
	for cur := s; cur != nil; cur = cur.Parent {
		if m := cur.Mode(); m != permission.ModeBubble {
			return m
		}
	}
	return permission.ModeDefault
}

// Update is a change to a session; nil fields are left alone.
type Update struct {
	Mode *permission.Mode
	// PlanFrom, with Mode plan, is the mode EnterPlanMode leaves (PrePlan).
	PlanFrom       *permission.Mode
	Cwd            *string
	AdditionalDirs *[]string
	Rules          *Rules
}

// Narrows reports whether u, applied to a session as before shows it, takes something away:
// a mode that runs less unasked (or one not ranked against the other), a deny or ask rule
// added, an allow rule or a directory dropped. What runs in the background under the session
// was started with what was taken, so it must not run on (Host.StopTasks).
func (u Update) Narrows(before Snapshot) bool {
	if u.Mode != nil && *u.Mode != before.Mode {
		was, okWas := permission.Rank(before.Mode)
		now, okNow := permission.Rank(*u.Mode)
		if !okWas || !okNow || now < was {
			return true
		}
	}
	gains := func(now, was []string) bool {
		return slices.ContainsFunc(now, func(x string) bool { return !slices.Contains(was, x) })
	}
	if u.Rules != nil && (gains(u.Rules.Deny, before.Rules.Deny) || gains(u.Rules.Ask, before.Rules.Ask) || gains(before.Rules.Allow, u.Rules.Allow)) {
		return true
	}
	return u.AdditionalDirs != nil && gains(before.AdditionalDirs, *u.AdditionalDirs)
}

// MarkNarrowed counts a change that took something away (Update.Narrows), after it applied.
func (s *Session) MarkNarrowed() { s.narrowings.Add(1) }

// Narrowings is a count that grows with each narrowing of s or of an ancestor: a call decided
// when it was n must not start, or run on, once it is more (the daemon stops what runs).
func (s *Session) Narrowings() uint64 {
	var n uint64
	for x := s; x != nil; x = x.Parent {
		n += x.narrowings.Load()
	}
	return n
}

// On is before with u applied, as Apply would leave the session: what a change is recorded
// as before it is in force.
func (u Update) On(before Snapshot) Snapshot {
	after := before
	if u.Mode != nil {
		after.Mode = *u.Mode
	}
	if u.Cwd != nil {
		after.Cwd = *u.Cwd
	}
	if u.AdditionalDirs != nil {
		after.AdditionalDirs = append([]string(nil), (*u.AdditionalDirs)...)
	}
	if u.Rules != nil {
		after.Rules = copyRules(*u.Rules)
	}
	return after
}

// Apply changes the session.
func (s *Session) Apply(u Update) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.Mode != nil {
		s.mode = *u.Mode
		s.prePlan = ""
		if u.PlanFrom != nil && *u.Mode == permission.ModePlan {
			s.prePlan = *u.PlanFrom
		}
	}
	if u.Cwd != nil {
		s.cwd = *u.Cwd
	}
	if u.AdditionalDirs != nil {
		s.additionalDirs = append([]string(nil), (*u.AdditionalDirs)...)
	}
	if u.Rules != nil {
		s.rules = copyRules(*u.Rules)
	}
}

func copyRules(r Rules) Rules {
	return Rules{
		Allow: append([]string(nil), r.Allow...),
		Deny:  append([]string(nil), r.Deny...),
		Ask:   append([]string(nil), r.Ask...),
	}
}

// Closed reports whether the session was removed (deleted, expired or ended by an admin).
// Nothing may start in a closed session: no call, worker or background task.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Lifetime is cancelled when the session is removed: calls still running in it stop then.
// A context rather than a channel, so a call ties itself to it with context.AfterFunc and no
// goroutine of its own.
func (s *Session) Lifetime() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lifetime == nil {
		s.lifetime, s.endLifetime = context.WithCancel(context.Background())
		if s.closed {
			s.endLifetime()
		}
	}
	return s.lifetime
}

// markClosed closes the session for good: Closed reports it and Lifetime is cancelled.
func (s *Session) markClosed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.endLifetime != nil {
		s.endLifetime()
	}
}

// RuleSet is the session's loaded rules (nil until loaded: the policy then denies).
func (s *Session) RuleSet() *permission.RuleSet { return s.ruleSet.Load() }

// SetRuleSet swaps in newly loaded rules and lifts a suspension.
func (s *Session) SetRuleSet(rs *permission.RuleSet) {
	s.ruleSet.Store(rs)
	s.suspended.Store(nil)
}

// Suspend denies every call of the session with reason until rules are set again.
func (s *Session) Suspend(reason string) { s.suspended.Store(&reason) }

// Suspended returns why the session is suspended, or "".
func (s *Session) Suspended() string {
	if r := s.suspended.Load(); r != nil {
		return *r
	}
	return ""
}
