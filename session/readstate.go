package session

import (
	"container/list"
	"sync"
	"time"
)

// FileRead is what the session remembers about a file it read, so Write and Edit can refuse
// to overwrite a file the agent has not seen or that changed since.
type FileRead struct {
	Path    string    `json:"path"`
	SHA256  string    `json:"sha256"`
	MTime   time.Time `json:"mtime"`
	Size    int64     `json:"size"`
	Offset  int       `json:"offset,omitempty"`
	Limit   int       `json:"limit,omitempty"`
	Partial bool      `json:"partial,omitempty"`
}

// ReadState is a size-bounded LRU of FileRead by path.
type ReadState struct {
	mu       sync.Mutex
	maxBytes int64
	used     int64
	order    *list.List
	byPath   map[string]*list.Element
}

// DefaultReadStateBytes bounds the read-file state of one session when the config says nothing.
const DefaultReadStateBytes = 1 << 20

// NewReadState returns an empty state bounded to about maxBytes of bookkeeping.
func NewReadState(maxBytes int64) *ReadState {
	if maxBytes <= 0 {
		maxBytes = DefaultReadStateBytes
	}
	return &ReadState{maxBytes: maxBytes, order: list.New(), byPath: map[string]*list.Element{}}
}

func entryCost(r FileRead) int64 { return int64(len(r.Path)+len(r.SHA256)) + 64 }

// Record remembers a read, evicting the least recently used entries past the bound.
func (rs *ReadState) Record(r FileRead) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if el, ok := rs.byPath[r.Path]; ok {
		rs.used -= entryCost(el.Value.(FileRead))
		rs.order.Remove(el)
	}
	rs.byPath[r.Path] = rs.order.PushFront(r)
	rs.used += entryCost(r)
	for rs.used > rs.maxBytes && rs.order.Len() > 1 {
		old := rs.order.Back()
		fr := old.Value.(FileRead)
		rs.order.Remove(old)
		delete(rs.byPath, fr.Path)
		rs.used -= entryCost(fr)
	}
}

// Lookup returns the remembered read of path.
func (rs *ReadState) Lookup(path string) (FileRead, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	el, ok := rs.byPath[path]
	if !ok {
		return FileRead{}, false
	}
	rs.order.MoveToFront(el)
	return el.Value.(FileRead), true
}

// Forget drops path, e.g. after a failed write left the file in an unknown state.
func (rs *ReadState) Forget(path string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if el, ok := rs.byPath[path]; ok {
		rs.used -= entryCost(el.Value.(FileRead))
		rs.order.Remove(el)
		delete(rs.byPath, path)
	}
}

// Len is the number of remembered files.
func (rs *ReadState) Len() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.order.Len()
}

// Clone returns an independent copy (a sub-agent's starting state).
func (rs *ReadState) Clone() *ReadState {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := NewReadState(rs.maxBytes)
	for el := rs.order.Back(); el != nil; el = el.Prev() {
		fr := el.Value.(FileRead)
		out.byPath[fr.Path] = out.order.PushFront(fr)
		out.used += entryCost(fr)
	}
	return out
}
