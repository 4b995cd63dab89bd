package sandbox

import (
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxLinkScan bounds the entries one protected dir's scan reads: a hook dir or an agent's
// settings dir holds a few; a plugin tree (~/.vim, ~/.oh-my-zsh) is not read whole.
const maxLinkScan = 256

// maxLinkScans bounds the cache (one entry per user and protected dir); full, it starts over.
const maxLinkScans = 1024

// linkScans keeps, for each user and protected dir, the symlinks found in it and in its dirs
// one level down, between calls: a hook or settings file kept as a link into the repository
// (.git/hooks/pre-commit -> ../../scripts/pre-commit) runs what its target holds, so the plan
// protects the target too. Reading every protected dir of a home (~/.vim, ~/bin, ~/.local/lib)
// on every call would cost more than the rest of the plan; an entry is used while each dir it
// read has the stamp it had (expansionCache's rule: adding, removing or renaming an entry, a
// link retargeted included, moves the dir's ctime, which no user can set back).
type linkScans struct {
	slack   time.Duration
	mu      sync.Mutex
	entries map[linkScanKey]*linkScan
}

type linkScanKey struct {
	uid uint32
	dir string
}

type linkScan struct {
	links []string // what each link says, joined to its dir when relative
	dirs  []dirStamp
}

func newLinkScans(slack time.Duration) *linkScans {
	return &linkScans{slack: slack, entries: map[linkScanKey]*linkScan{}}
}

// targets returns what the symlinks in dir (a protected dir, resolved) say, a relative one
// joined to its dir, neither cleaned nor resolved. Run as the caller, uid.
func (c *linkScans) targets(dir string, uid uint32) []string {
	if c == nil {
		c = newLinkScans(stampSlack) // kept nowhere
	}
	key := linkScanKey{uid, dir}
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e == nil || !fresh(e.dirs) {
		var cacheable bool
		e, cacheable = c.scan(dir)
		if cacheable {
			c.mu.Lock()
			if len(c.entries) >= maxLinkScans {
				c.entries = map[linkScanKey]*linkScan{}
			}
			c.entries[key] = e
			c.mu.Unlock()
		}
	}
	return e.links
}

// scan reads dir and its dirs one level down, at most maxLinkScan entries, each dir stamped
// before it is read.
func (c *linkScans) scan(dir string) (*linkScan, bool) {
	e := &linkScan{}
	cacheable := true
	budget := maxLinkScan
	var read func(d string, depth int)
	read = func(d string, depth int) {
		st, ok := stampOf(d)
		cacheable = cacheable && ok && time.Now().UnixNano()-st.ctimeNs >= int64(c.slack)
		e.dirs = append(e.dirs, st)
		ents, err := os.ReadDir(d)
		if err != nil {
			return
		}
		// This dir's own links before any dir below it takes the budget (.claude/settings.json
		// after a large .claude/agents).
		var dirs []string
		for _, ent := range ents {
			if budget--; budget < 0 {
				return
			}
			p := filepath.Join(d, ent.Name())
			switch {
			case ent.Type()&os.ModeSymlink != 0:
				t, err := os.Readlink(p)
				if err != nil || t == "" {
					continue
				}
				if !filepath.IsAbs(t) {
					t = d + "/" + t // not cleaned: a `..` after a link is the kernel's to resolve
				}
				e.links = append(e.links, t)
			case ent.IsDir() && depth < 1:
				dirs = append(dirs, p)
			}
		}
		for _, p := range dirs {
			read(p, depth+1)
		}
	}
	read(dir, 0)
	return e, cacheable
}

// fresh reports whether every dir stamped is unchanged.
func fresh(dirs []dirStamp) bool {
	for _, d := range dirs {
		st, ok := stampOf(d.path)
		if !ok || st != d {
			return false
		}
	}
	return true
}
