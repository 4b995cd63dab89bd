package sandbox

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// pinBudget bounds the files the daemon holds open for running calls' hidden and protected
// paths (pinned: each a descriptor of the daemon's until its call ends), per user and in all.
// A user's wildcard rules can name thousands of files a call, and a user runs dozens of calls
// and tasks at once: unbounded, one user's calls took every descriptor the daemon may open,
// and every other user's calls and sessions failed.
type pinBudget struct {
	mu         sync.Mutex
	held       map[uint32]int
	total      int
	limit      func() int // the descriptors the daemon may open; a variable for tests
	minPerUser int        // what a user may always hold: dozens of calls with the default paths
}

func newPinBudget() *pinBudget {
	return &pinBudget{held: map[uint32]int{}, limit: openFilesLimit, minPerUser: 4096}
}

// openFilesLimit is the daemon's soft RLIMIT_NOFILE.
func openFilesLimit() int {
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) != nil || rl.Cur > 1<<30 {
		return 1 << 20
	}
	return int(rl.Cur)
}

// bounds are what all calls may hold, half the daemon's descriptors (the rest are its
// connections, pools, logs and children's pipes), and what one user's may: a quarter of that,
// and at least enough for a user's dozens of calls with the default deny and protected paths.
func (b *pinBudget) bounds() (all, perUser int) {
	all = b.limit() / 2
	return all, max(b.minPerUser, all/4)
}

// take reserves n pins for uid's call, or says why not.
func (b *pinBudget) take(uid uint32, n int) error {
	all, perUser := b.bounds()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[uid]+n > perUser || b.total+n > all {
		return errcode.New(errcode.RateLimited, fmt.Errorf("this call would hold %d of the daemon's files open for the paths it hides and protects, and this user's running calls, background tasks and sessions (each session's file worker) already hold %d (at most %d a user, %d in all): wait for calls to end, end sessions not in use, or narrow the rules with wildcards that name many files", n, b.held[uid], perUser, all))
	}
	b.held[uid] += n
	b.total += n
	return nil
}

// give returns n pins of uid's.
func (b *pinBudget) give(uid uint32, n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held[uid] -= n; b.held[uid] <= 0 {
		delete(b.held, uid)
	}
	b.total -= n
}
