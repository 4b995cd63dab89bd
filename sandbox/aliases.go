package sandbox

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A host may show one directory at several places: a bind mount (/srv/home of /home), or one
// file system mounted twice. A mount over a hidden or read-only path covers that place only,
// so every other place the mount table shows the path at gets the same mount: otherwise
// `cat /srv/home/u/ws/secrets/key` reads what a Read deny rule hides under /home.

// mountEntry is one mount of a mountinfo table: the dir root of file system dev, shown at
// point; ro when the mount or its file system is read-only.
type mountEntry struct {
	dev, root, point string
	ro               bool
}

// mountTab is a mountinfo table, in the kernel's order (a later mount on the same point is on
// top), indexed for the lookups a plan makes (a hundred paths a call).
type mountTab struct {
	all     []mountEntry
	byPoint map[string]int   // mount point -> the last entry there (the one on top)
	byDev   map[string][]int // file system -> its entries
	// shared are the file systems one of whose dirs shows at two places. A mount of a dir onto
	// itself (systemd's ProtectSystem and ReadWritePaths make dozens) shows nothing twice; on
	// most hosts no file system is shared, and a plan looks no further than this.
	shared map[string]bool
}

// maxPairwise bounds the mounts of one file system parseMountinfo compares pairwise to tell
// whether any shows a dir twice.
const maxPairwise = 64

// parseMountinfo reads a mountinfo table. Entries whose root is no path (an nsfs mount), or
// that are cut short, are left out.
func parseMountinfo(b []byte) *mountTab {
	t := &mountTab{byPoint: map[string]int{}, byDev: map[string][]int{}, shared: map[string]bool{}}
	for line := range strings.SplitSeq(string(b), "\n") {
		// id parent major:minor root mount-point options [optional fields] - type source super-options
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 || !strings.HasPrefix(f[3], "/") {
			continue
		}
		m := mountEntry{dev: f[2], root: unescapeMountinfo(f[3]), point: unescapeMountinfo(f[4]),
			ro: slices.Contains(strings.Split(f[5], ","), "ro") || slices.Contains(strings.Split(f[sep+3], ","), "ro")}
		t.byPoint[m.point] = len(t.all)
		t.byDev[m.dev] = append(t.byDev[m.dev], len(t.all))
		t.all = append(t.all, m)
	}
	for dev, idx := range t.byDev {
		if len(idx) > maxPairwise {
			t.shared[dev] = true // too many to compare pairwise at every read: aliases decides per path
			continue
		}
		for _, i := range idx {
			for _, j := range idx {
				if m, o := t.all[i], t.all[j]; i != j && under(m.root, o.root) &&
					filepath.Join(o.point, strings.TrimPrefix(m.root, o.root)) != m.point {
					t.shared[dev] = true
				}
			}
		}
	}
	return t
}

// mountAt returns the index of the mount p (clean, absolute) lies on: the one with the longest
// mount point holding p, the last listed there; -1 when none does.
func (t *mountTab) mountAt(p string) int {
	if !strings.HasPrefix(p, "/") {
		return -1
	}
	for {
		if i, ok := t.byPoint[p]; ok {
			return i
		}
		if p == "/" {
			return -1
		}
		p = p[:max(strings.LastIndexByte(p, '/'), 1)]
	}
}

// aliases returns the other places tab shows the clean absolute path p at: for every other
// mount of p's file system whose root holds p, the path p has there, when that mount is what
// shows at it (a mount deeper on the way shows something else, or is an alias itself).
func aliases(t *mountTab, p string) []string {
	if t == nil || len(t.shared) == 0 {
		return nil
	}
	own := t.mountAt(p)
	if own < 0 || !t.shared[t.all[own].dev] {
		return nil
	}
	m0 := t.all[own]
	inFS := filepath.Join(m0.root, strings.TrimPrefix(p, m0.point))
	var out []string
	for _, i := range t.byDev[m0.dev] {
		m := t.all[i]
		if i == own || !under(inFS, m.root) {
			continue
		}
		a := filepath.Join(m.point, strings.TrimPrefix(inFS, m.root))
		if a != p && t.mountAt(a) == i {
			out = append(out, a)
		}
	}
	return out
}

// aliasLookup answers aliases against one table and keeps the paths it was asked about. A
// pooled init holds a copy of the table as it was when the init started; if that copy shows
// one of those paths at a place the plan's table no longer does (a bind mount gone since),
// the init would show it uncovered, and is not used (staleIn).
type aliasLookup struct {
	tab   *mountTab
	asked []string
	// origin maps each alias withAliases added to the path it shows: what it is (a file, a
	// dir) is looked up there, since a pooled init may still show an alias the host no longer
	// has (a bind removed since the table was read).
	origin map[string]string
}

// of returns the aliases of p in the lookup's table.
func (l *aliasLookup) of(p string) []string {
	l.asked = append(l.asked, p)
	return aliases(l.tab, p)
}

// withAliases returns paths followed by every alias of each that is not among them already.
func (l *aliasLookup) withAliases(paths []string) []string {
	out := slices.Clone(paths)
	seen := make(map[string]bool, len(paths))
	for _, p := range paths {
		seen[p] = true
	}
	for _, p := range paths {
		for _, a := range l.of(p) {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
				if l.origin == nil {
					l.origin = map[string]string{}
				}
				l.origin[a] = p
			}
		}
	}
	return out
}

// staleIn reports whether old, the table a pooled init copied, shows a path the plan asked
// about at a place the plan's table does not.
func (l *aliasLookup) staleIn(old *mountTab) bool {
	if old == l.tab || old == nil || len(old.shared) == 0 {
		return false
	}
	for _, p := range l.asked {
		now := aliases(l.tab, p)
		for _, a := range aliases(old, p) {
			if !slices.Contains(now, a) {
				return true
			}
		}
	}
	return false
}

// mountTable is the daemon's mount table, which every child's mount namespace starts as a
// copy of. It is read again only when the kernel says it changed (poll on mountinfo reports
// POLLPRI), and at most every minReread, so a call pays one poll for it; each read is a new
// *mountTab, so an unchanged table is the same pointer. The fd is a raw one, never os.File's: Go's netpoller would
// register it and its own poll would take the change reports.
type mountTable struct {
	mu  sync.Mutex
	fd  int // /proc/self/mountinfo, opened as root before any plan runs as a caller; -1 closed
	tab *mountTab
	// stale: the kernel reported a change not read yet; read: when tab was read.
	stale bool
	read  time.Time
}

// minReread is how long a table read serves plans before a change is read: a user's FUSE
// mounts reach the daemon's table too, and mounting and unmounting in a loop must not make
// every other user's call read and parse a table of a thousand mounts. A bind mount an admin
// adds is covered from the next read on; one removed is safe meanwhile (the plan covers a
// place that no longer shows anything).
const minReread = 50 * time.Millisecond

func newMountTable() (*mountTable, error) {
	fd, err := unix.Open("/proc/self/mountinfo", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: "/proc/self/mountinfo", Err: err}
	}
	return &mountTable{fd: fd}, nil
}

// get returns the current table. An error means the table could not be read: the call fails
// rather than be planned without knowing where its hidden paths also show.
func (t *mountTable) get() (*mountTab, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd < 0 {
		return nil, os.ErrClosed
	}
	if t.tab != nil {
		t.stale = t.stale || t.changed()
		if !t.stale || time.Since(t.read) < minReread {
			return t.tab, nil
		}
	}
	b, err := t.readAll()
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: "/proc/self/mountinfo", Err: err}
	}
	t.tab, t.stale, t.read = parseMountinfo(b), false, time.Now()
	return t.tab, nil
}

// changed reports whether the table changed since the last poll, or poll cannot tell.
func (t *mountTable) changed() bool {
	fds := []unix.PollFd{{Fd: int32(t.fd), Events: unix.POLLPRI}}
	n, err := unix.Poll(fds, 0)
	return err != nil || n > 0 && fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0
}

// maxMountinfoBytes bounds the table read: far past any host's (a line is ~150 bytes), so a
// table grown past it by mounts without end fails the plan rather than the daemon's memory.
const maxMountinfoBytes = 64 << 20

// readAll reads the table from its start.
func (t *mountTable) readAll() ([]byte, error) {
	if _, err := unix.Seek(t.fd, 0, io.SeekStart); err != nil {
		return nil, err
	}
	return readFD(t.fd, maxMountinfoBytes)
}

// readFD reads fd from where it is to its end: unix.EFBIG past limit bytes.
func readFD(fd, limit int) ([]byte, error) {
	b := make([]byte, 0, min(limit+1, 16<<10))
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(cap(b), limit+1-len(b)))
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if b = b[:len(b)+n]; len(b) > limit {
			return nil, unix.EFBIG
		}
		if n == 0 {
			return b, nil
		}
	}
}

// close releases the table's fd; a get after it fails.
func (t *mountTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
}
