package session

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// ErrNotFound is returned for a session that does not exist or that the caller may not see;
// the two are deliberately indistinguishable so another uid cannot probe for sessions.
var ErrNotFound = errors.New("session not found")

// Params are what a new session is created with; the caller has validated the directories.
type Params struct {
	Cwd            string
	AdditionalDirs []string
	Mode           permission.Mode
	Rules          Rules
	ParentID       string
	// Parent is the parent session (the caller looked it up as ParentID); the child copies
	// its read-file state and result budget. Its rules bind the child too: the daemon adds
	// its rule set's (permission.RuleSet.Inheritable) to the child's.
	Parent       *Session
	PersistCwd   bool
	TrustProject bool
	// Network is none, proxy or host (config.Network*), decided by the daemon.
	Network string
	// ClientKey is what the session's client made it for (protocol.CreateSession.ClientKey).
	ClientKey string
	// Disposable is protocol.CreateSession.Disposable.
	Disposable bool
	// Umask is the file mode creation mask the session's calls run with.
	Umask          uint32
	ReadStateBytes int64
	BudgetChars    int64
}

// Store holds the live sessions.
type Store struct {
	mu       sync.RWMutex
	sessions map[string]*Session
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{sessions: map[string]*Session{}} }

// Create makes a session owned by owner.
func (st *Store) Create(owner Caller, p Params) *Session {
	s := &Session{
		ID: NewID(), Owner: owner, ParentID: p.ParentID, Created: time.Now().UTC(), PersistCwd: p.PersistCwd, TrustProject: p.TrustProject,
		Network: p.Network, ClientKey: p.ClientKey, Disposable: p.Disposable, Umask: p.Umask, Root: p.Cwd, cwd: p.Cwd, additionalDirs: append([]string(nil), p.AdditionalDirs...),
		mode: p.Mode, rules: copyRules(p.Rules),
		Reads:  NewReadState(p.ReadStateBytes),
		Budget: NewBudget(p.BudgetChars),
	}
	if par := p.Parent; par != nil {
		// A sub-agent starts from what its parent has seen and spent, on copies: nothing it
		// does reaches back into the parent.
		s.Parent = par
		s.Reads = par.Reads.Clone()
		s.Budget = par.Budget.Clone()
	}
	st.mu.Lock()
	st.sessions[s.ID] = s
	st.mu.Unlock()
	return s
}

// Descends reports whether s is a (grand)child of ancestor.
func (s *Session) Descends(ancestor *Session) bool {
	for p := s.Parent; p != nil; p = p.Parent {
		if p == ancestor {
			return true
		}
	}
	return false
}

// Get returns the session for acting in it (its calls, decisions and changes run as its
// owner): only its owner, or root, may. An admin who is not root gets ErrNotFound, as any
// other user does: admins see and end sessions, they never act as someone else.
//
// A session runs as its creator's groups: a process of its owner that lacks one of them (it
// dropped it, or the user was removed from it since) is refused, or it would get it back.
func (st *Store) Get(caller Caller, id string) (*Session, error) {
	s, err := st.lookup(id, func(s *Session) bool { return mayAct(caller, s) })
	if err != nil {
		return nil, err
	}
	if g, lacks := lacksGroup(caller, s.Owner); lacks {
		return nil, errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("session %s runs with group %d, %s (dropped since, or the user left it): calls here would get it back; make a new session from this process", id, g, protocol.SessionGroupsLacking))
	}
	return s, nil
}

// lacksGroup returns a group of owner's (its gid or a supplementary one) that caller, the
// same user, does not hold. Root, and an admin acting on another's session, are not held to
// the owner's groups.
func lacksGroup(caller, owner Caller) (uint32, bool) {
	if caller.UID != owner.UID || caller.UID == 0 {
		return 0, false
	}
	has := func(g uint32) bool { return caller.GID == g || slices.Contains(caller.Groups, g) }
	if !has(owner.GID) {
		return owner.GID, true
	}
	for _, g := range owner.Groups {
		if !has(g) {
			return g, true
		}
	}
	return 0, false
}

// See returns the session for looking at it (its state, rules, tasks): its owner and admins.
func (st *Store) See(caller Caller, id string) (*Session, error) {
	return st.lookup(id, func(s *Session) bool { return visible(caller, s) })
}

func (st *Store) lookup(id string, allowed func(*Session) bool) (*Session, error) {
	st.mu.RLock()
	s, ok := st.sessions[id]
	st.mu.RUnlock()
	if !ok || !allowed(s) {
		return nil, ErrNotFound
	}
	return s, nil
}

// List returns the sessions caller may see (its own; all for admins), oldest first.
func (st *Store) List(caller Caller) []*Session {
	st.mu.RLock()
	out := make([]*Session, 0, len(st.sessions))
	for _, s := range st.sessions {
		if visible(caller, s) {
			out = append(out, s)
		}
	}
	st.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// Remove deletes the session if caller may see it (its owner, or an admin ending it), with
// every session below it: a sub-agent works for the agent above it and does not outlive it,
// nor an admin's ending of it. It returns them, the named one first, so the caller can release
// what each holds (worker, cgroups, background tasks).
func (st *Store) Remove(caller Caller, id string) ([]*Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[id]
	if !ok || !visible(caller, s) {
		return nil, ErrNotFound
	}
	out := []*Session{s}
	for _, x := range st.sessions {
		if x.Descends(s) {
			out = append(out, x)
		}
	}
	for _, x := range out {
		delete(st.sessions, x.ID)
		// Closed before the caller releases what the session holds: what checks Closed under
		// the same lock as that release (workers, tasks) cannot start anything after it.
		x.markClosed()
	}
	return out, nil
}

// All returns every session, for shutdown.
func (st *Store) All() []*Session {
	return st.List(Caller{Admin: true})
}

// Len is the number of live sessions.
func (st *Store) Len() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.sessions)
}

// visible: the owner and admins see a session, and admins may end it.
func visible(caller Caller, s *Session) bool {
	return caller.Admin || caller.UID == s.Owner.UID
}

// mayAct: only the owner acts in a session, and root, who can become anyone anyway.
func mayAct(caller Caller, s *Session) bool {
	return caller.UID == s.Owner.UID || caller.UID == 0
}
