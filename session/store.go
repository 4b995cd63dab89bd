package session

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/permission"
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
	PersistCwd     bool
	TrustProject   bool
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
		Root: p.Cwd, cwd: p.Cwd, additionalDirs: append([]string(nil), p.AdditionalDirs...),
		mode: p.Mode, rules: copyRules(p.Rules),
		Reads:  NewReadState(p.ReadStateBytes),
		Budget: NewBudget(p.BudgetChars),
	}
	st.mu.Lock()
	st.sessions[s.ID] = s
	st.mu.Unlock()
	return s
}

// Get returns the session if caller owns it or is an admin.
func (st *Store) Get(caller Caller, id string) (*Session, error) {
	st.mu.RLock()
	s, ok := st.sessions[id]
	st.mu.RUnlock()
	if !ok || !visible(caller, s) {
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

// Remove deletes the session if caller may see it, and returns it so the caller can release
// what it holds (worker, cgroups, background tasks).
func (st *Store) Remove(caller Caller, id string) (*Session, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[id]
	if !ok || !visible(caller, s) {
		return nil, ErrNotFound
	}
	delete(st.sessions, id)
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s, nil
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

func visible(caller Caller, s *Session) bool {
	return caller.Admin || caller.UID == s.Owner.UID
}
