package policy

import (
	"encoding/json"
	"sync"

	"github.com/sandboxd/sandboxd/permission"
)

// decisionCache memoises decisions keyed by (policy digest, rules digest, normalized facts).
// The policy is deterministic (nondeterministic builtins are removed from its capabilities),
// so a key fully determines its decision; a reload changes the digest and so every key.
type decisionCache struct {
	mu   sync.Mutex
	max  int
	m    map[string]permission.Decision
	ring []string // insertion order, for FIFO eviction
	next int
}

func newDecisionCache(n int) *decisionCache {
	return &decisionCache{max: n, m: make(map[string]permission.Decision, n), ring: make([]string, n)}
}

// cacheKey normalises the facts through encoding/json (map keys sorted).
func cacheKey(policy, rules string, f *permission.Facts) string {
	b, err := json.Marshal(f)
	if err != nil {
		return "" // not cacheable; evaluate
	}
	return policy + "\x00" + rules + "\x00" + string(b)
}

func (c *decisionCache) get(k string) (permission.Decision, bool) {
	if k == "" {
		return permission.Decision{}, false
	}
	c.mu.Lock()
	d, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		d.Trace = append([]string(nil), d.Trace...)
	}
	return d, ok
}

func (c *decisionCache) put(k string, d permission.Decision) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	if old := c.ring[c.next]; old != "" {
		delete(c.m, old)
	}
	c.ring[c.next] = k
	c.next = (c.next + 1) % c.max
	c.m[k] = d
}
