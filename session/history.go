package session

import (
	"encoding/json"
	"sync"
)

// historyMax bounds the calls a session remembers for auto mode's classifier.
const historyMax = 100

// History is a session's last calls (tool, redacted input, decision), oldest first, for auto
// mode's classifier. Its zero value is ready.
type History struct {
	mu    sync.Mutex
	calls []json.RawMessage
}

// Add remembers one call, dropping the oldest past the bound.
func (h *History) Add(call json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == historyMax {
		copy(h.calls, h.calls[1:])
		h.calls = h.calls[:historyMax-1]
	}
	h.calls = append(h.calls, call)
}

// Last returns up to n of the latest calls, oldest first.
func (h *History) Last(n int) []json.RawMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > len(h.calls) {
		n = len(h.calls)
	}
	return append([]json.RawMessage{}, h.calls[len(h.calls)-n:]...)
}
