package policy

import (
	"context"
	"strings"
	"testing"
)

// TestDecisionCacheKeepsNoLargeInputs: the decision cache is keyed by the whole facts, the
// call's input included, and shared by every user: a large input is decided afresh, not
// kept. It kept a request body's worth per entry, gigabytes for one user's large Writes.
func TestDecisionCacheKeepsNoLargeInputs(t *testing.T) {
	e := newEngine(t, Config{DecisionCacheSize: 16})
	rs := lsCall.ruleSet(t)
	for i := range 4 {
		big := call{cmd: "echo " + strings.Repeat("x", 1<<20) + strings.Repeat("y", i)}
		for range 2 {
			if _, err := e.Decide(context.Background(), big.facts(), rs); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := 0
	for _, k := range e.cache.lru.Keys() {
		held += len(k)
	}
	if held > 16*maxCachedFactsBytes {
		t.Fatalf("the decision cache holds %d bytes of keys", held)
	}
	// Small calls are still cached.
	if _, err := e.Decide(context.Background(), lsCall.facts(), rs); err != nil {
		t.Fatal(err)
	}
	if n := e.cache.lru.Len(); n != 1 {
		t.Fatalf("cache entries %d, want the small call's alone", n)
	}
}
