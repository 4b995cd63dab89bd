package executor

import "sync"

// heldBytes counts, by uid, the room the calls running now have taken of what one user's calls
// may read into the daemon's memory at once (rg's output, a fetched page): a user runs up to
// limits.calls_per_user calls at once, and each whole one, copied into its result, would
// otherwise hold the daemon's memory many times over.
type heldBytes struct {
	mu sync.Mutex
	by map[uint32]int64
}

// heldBounds are the room of one call (perCall), of all of one user's (perUser), and what a
// call gets however much the user's others hold (least).
type heldBounds struct{ perCall, perUser, least int64 }

// take returns the room for one more call of uid's, and counts it until give.
func (g *heldBytes) take(uid uint32, b heldBounds) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by == nil {
		g.by = map[uint32]int64{}
	}
	n := max(b.least, min(b.perCall, b.perUser-g.by[uid]))
	g.by[uid] += n
	return n
}

// give returns room n that take gave.
func (g *heldBytes) give(uid uint32, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by[uid] -= n; g.by[uid] <= 0 {
		delete(g.by, uid)
	}
}
