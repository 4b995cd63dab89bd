package subid

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Table is one subordinate id file: the ranges of ids each user may map into a user namespace
// it makes (newuidmap, newgidmap). A process running as one of those ids is that user's doing,
// whatever the id. The file is read again when it changes, looked at most once a second.
type Table struct {
	path string

	mu      sync.Mutex
	checked time.Time
	stamp   stamp
	ranges  []span // by start
}

// span is ids [start, end) of owner's.
type span struct {
	start, end uint64
	owner      uint32
}

type stamp struct {
	ino, size int64
	mtime     time.Time
}

// recheck is how often the file is looked at again.
const recheck = time.Second

// maxFileBytes bounds what is read: a real file is a line per user.
const maxFileBytes = 4 << 20

// Open returns the table of path (read on first use; a missing file holds no ranges).
func Open(path string) *Table { return &Table{path: path} }

// Owner returns the uid of the user, other than root, whose range holds id. Root's ranges
// are no one's: root's ids are not counted against any user.
func (t *Table) Owner(id uint32) (uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refresh()
	i, found := slices.BinarySearchFunc(t.ranges, uint64(id), func(s span, id uint64) int {
		switch {
		case s.end <= id:
			return -1
		case s.start > id:
			return 1
		}
		return 0
	})
	if !found {
		return 0, false
	}
	return t.ranges[i].owner, true
}

// Holds reports whether id lies in some user's range (root's aside).
func (t *Table) Holds(id uint32) bool {
	_, ok := t.Owner(id)
	return ok
}

// refresh reads the file again if it changed; t.mu is held. A file that cannot be read keeps
// the ranges last read: forgetting them would give each id its own limits again.
func (t *Table) refresh() {
	now := time.Now()
	if !t.checked.IsZero() && now.Sub(t.checked) < recheck {
		return
	}
	t.checked = now
	fi, err := os.Stat(t.path)
	if err != nil {
		if os.IsNotExist(err) {
			t.ranges, t.stamp = nil, stamp{}
		}
		return
	}
	st := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = int64(s.Ino)
	}
	if st == t.stamp {
		return
	}
	f, err := os.Open(t.path)
	if err != nil {
		return
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes))
	if err != nil {
		return
	}
	t.ranges, t.stamp = parse(b, lookupUID), st
}

// lookupUID resolves an owner field: a user name, or a uid as newuidmap also takes.
func lookupUID(owner string) (uint32, bool) {
	if n, err := strconv.ParseUint(owner, 10, 32); err == nil {
		return uint32(n), true
	}
	u, err := user.Lookup(owner)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(u.Uid, 10, 32)
	return uint32(n), err == nil
}

// parse reads "owner:start:count" lines. A line it cannot read, or whose owner is unknown or
// root, gives no range.
func parse(b []byte, resolve func(string) (uint32, bool)) []span {
	var out []span
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := bytes.Split(line, []byte(":"))
		if len(f) != 3 {
			continue
		}
		start, err1 := strconv.ParseUint(string(f[1]), 10, 32)
		count, err2 := strconv.ParseUint(string(f[2]), 10, 32)
		if err1 != nil || err2 != nil || count == 0 || start+count > 1<<32 {
			continue
		}
		owner, ok := resolve(string(f[0]))
		if !ok || owner == 0 {
			continue
		}
		out = append(out, span{start: start, end: start + count, owner: owner})
	}
	slices.SortStableFunc(out, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	// Overlapping ranges (a misconfigured file): an id in two is the first one's, and the
	// rest of the second stays its owner's. BinarySearch needs them disjoint.
	kept := out[:0]
	for _, s := range out {
		if len(kept) > 0 {
			s.start = max(s.start, kept[len(kept)-1].end)
		}
		if s.start < s.end {
			kept = append(kept, s)
		}
	}
	return kept
}
