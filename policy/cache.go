package policy

import (
	"encoding/json"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sandboxd/sandboxd/permission"
)

// decisionCache memoises decisions keyed by (policy digest, rules digest, normalized facts).
// The policy is deterministic (nondeterministic builtins are removed from its capabilities),
// so a key fully determines its decision; a reload changes the digest and so every key.
type decisionCache struct {
	lru *lru.Cache[string, permission.Decision]
}

func newDecisionCache(n int) *decisionCache {
	c, _ := lru.New[string, permission.Decision](n) // n > 0: New's only error
	return &decisionCache{lru: c}
}

// maxCachedFactsBytes bounds the facts a cached decision is keyed by. The key holds the
// call's whole input, and the cache is the daemon's, shared by every user: a Write of a
// request body's worth (max_request_bytes) kept that much in the daemon's memory for each
// of its entries, 4 GiB for one user's 4096 large calls, never freed. A call that large is
// decided afresh each time; calls that repeat are small.
const maxCachedFactsBytes = 16 << 10

// cacheKey normalises the facts through encoding/json (map keys sorted); "" for facts not
// cached.
func cacheKey(policy, rules string, f *permission.Facts) string {
	b, err := json.Marshal(f)
	if err != nil || len(b) > maxCachedFactsBytes {
		return "" // not cacheable; evaluate
	}
	return policy + "\x00" + rules + "\x00" + string(b)
}

func (c *decisionCache) get(k string) (permission.Decision, bool) {
	if k == "" {
		return permission.Decision{}, false
	}
	d, ok := c.lru.Get(k)
	if ok {
		d.Trace = append([]string(nil), d.Trace...)
	}
	return d, ok
}

func (c *decisionCache) put(k string, d permission.Decision) { c.lru.Add(k, d) }
