package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Landlock access rights (uapi linux/landlock.h), spelled out because the build host's headers
// and x/sys may both predate the newest ABI.
const (
	llExecute    = 1 << 0
	llWriteFile  = 1 << 1
	llReadFile   = 1 << 2
	llReadDir    = 1 << 3
	llRemoveDir  = 1 << 4
	llRemoveFile = 1 << 5
	llMakeChar   = 1 << 6
	llMakeDir    = 1 << 7
	llMakeReg    = 1 << 8
	llMakeSock   = 1 << 9
	llMakeFifo   = 1 << 10
	llMakeBlock  = 1 << 11
	llMakeSym    = 1 << 12
	llRefer      = 1 << 13 // ABI 2
	llTruncate   = 1 << 14 // ABI 3
	llIoctlDev   = 1 << 15 // ABI 5

	llScopeAbstractUnix = 1 << 0 // ABI 6
	llScopeSignal       = 1 << 1 // ABI 6

	llRead  = llExecute | llReadFile | llReadDir
	llWrite = llWriteFile | llRemoveDir | llRemoveFile | llMakeChar | llMakeDir | llMakeReg |
		llMakeSock | llMakeFifo | llMakeBlock | llMakeSym | llRefer | llTruncate | llIoctlDev

	maxDenyExpand = 4096 // directory entries read to build rules around a deny path
)

// landlockABI returns the kernel's landlock ABI version, 0 when it has none.
func landlockABI() int {
	const createRulesetVersion = 1
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(v)
}

// landlockMasks returns the handled filesystem rights, the scopes and the ruleset attribute
// size the kernel's ABI knows.
func landlockMasks(abi int) (fs, scoped uint64, attrSize uint32) {
	fs = llRead | llWrite
	attrSize = 8
	if abi < 2 {
		fs &^= llRefer
	}
	if abi < 3 {
		fs &^= llTruncate
	}
	if abi < 5 {
		fs &^= llIoctlDev
	}
	if abi >= 4 {
		attrSize = 16 // handled_access_net exists; we leave it 0 (the netns does the network)
	}
	if abi >= 6 {
		// A confined process may not signal processes outside its domain (the daemon, other
		// calls) nor connect to abstract unix sockets of the host (X11, dbus, containerd).
		scoped = llScopeAbstractUnix | llScopeSignal
		attrSize = 24
	}
	return fs, scoped, attrSize
}

type llRule struct {
	access uint64
	path   string
}

type landlockPlan struct {
	handledFS uint64
	scoped    uint64
	attrSize  uint32
	// base is the read rules around deny paths that may appear later (expansions of "/"):
	// most of a ruleset's cost, and the same call after call. baseKey is the expansion cache
	// entry they came from (nil: not cached). A pooled init prebuilds the base of a hint
	// (landlockHint) while it waits; prebuilt says its call uses that instead of base.
	base     []llRule
	baseKey  *expansion
	prebuilt bool
	rules    []llRule // the call's own: /tmp, /dev, read-only and writable dirs
}

// landlockHint is the base a pooled init prebuilds: the latest call's.
type landlockHint struct {
	handledFS, scoped uint64
	attrSize          uint32
	key               *expansion
	rules             []llRule
}

func (l *landlockPlan) hint() *landlockHint {
	return &landlockHint{handledFS: l.handledFS, scoped: l.scoped, attrSize: l.attrSize, key: l.baseKey, rules: l.base}
}

// matches reports whether an init prebuilt from h has exactly l's base: the same masks and
// rules, from the same expansion cache entry (so no directory they came from changed since).
func (h *landlockHint) matches(l *landlockPlan) bool {
	return h != nil && l != nil && h.key != nil && h.key == l.baseKey && h.handledFS == l.handledFS &&
		h.scoped == l.scoped && h.attrSize == l.attrSize && slices.Equal(h.rules, l.base)
}

// landlockRules builds the ruleset: reads everywhere except around deny paths, writes only to
// the writable dirs, /tmp and the few /dev nodes.
//
// WARNING: decides what the child may read and write; rerun as root after changing:
// go test -run 'TestEscape|TestLandlock' ./sandbox/
func landlockRules(c *expansionCache, abi int, spec *Spec, writable, readOnly, deny, later, covered []string) (*landlockPlan, error) {
	if abi <= 0 {
		return nil, nil
	}
	fs, scoped, size := landlockMasks(abi)
	plan := &landlockPlan{handledFS: fs, scoped: scoped, attrSize: size}
	// The base: reads everywhere but around deny paths that may appear later. It is what costs
	// (a rule per entry of each ancestor of such a path) and what a pooled init can build ahead
	// from a hint (see landlockPlan.base), so it holds only paths the call's mounts leave as
	// they are. The host's /tmp gets no rule: every child has its own /tmp, granted below. A
	// deny path that exists is covered by the mount plan (a file by /dev/null, which reads as
	// empty): its rule is the call's, opened after the mounts, so it binds what covers it.
	root, key, err := c.get("/", llRead, later)
	if err != nil {
		return nil, err
	}
	plan.baseKey = key
	// An existing deny path among later (covered) is covered by the call's mounts: its rule,
	// opened after them, binds the cover (an empty file or dir), not what may replace the path
	// on the host.
	for _, d := range covered {
		plan.rules = append(plan.rules, llRule{access: llRead, path: d})
	}
	for _, r := range root {
		switch {
		case r.path == "/tmp":
		case slices.Contains(deny, r.path):
			plan.rules = append(plan.rules, r)
		default:
			plan.base = append(plan.base, r)
		}
	}
	// The private /tmp and /dev/shm are per call; writable like a scratch dir. The rest of
	// /dev is the prelude's read-only tmpfs: its device nodes (null, zero, tty, ...) and this
	// call's devpts are all that is beneath it, so one rule covers them (one per node cost a
	// few µs each), and no file can be created there whatever the rule says.
	plan.rules = append(plan.rules, llRule{access: llRead | llWrite, path: "/tmp"},
		llRule{access: llRead | llWrite, path: "/dev/shm"},
		llRule{access: llRead | llWriteFile | llIoctlDev | llTruncate, path: "/dev"})
	for _, d := range readOnly {
		r, _, err := c.get(d, llRead, later)
		if err != nil {
			return nil, err
		}
		plan.rules = append(plan.rules, r...)
	}
	access := uint64(llRead | llWrite)
	if spec.ReadOnlyWorkspace {
		access = llRead
	}
	// A writable dir is granted whole, even when a deny path lies inside it (a session in
	// $HOME with ~/.ssh denied): expanding it around the deny path would leave the agent
	// unable to create anything directly in its own working directory. Deny paths that exist
	// are hidden by the mount plan; one created inside a writable dir while a call runs is
	// readable by that call (the next call's mounts hide it). Deny paths outside the writable
	// dirs keep the full protection of the expansion above.
	for _, d := range writable {
		if denied(d, deny) {
			continue // the writable dir is itself denied: grant nothing
		}
		plan.rules = append(plan.rules, llRule{access: access, path: d})
	}
	return plan, nil
}

// expansionCache keeps expandAround's results between calls. An expansion lists every
// ancestor of a deny path (/, the home directory, ...): much of a plan's time, for the same
// answer call after call. An entry is used only while each directory it listed still has the
// dev, ino, mtime and ctime it had, so a cached expansion is the one expandAround would build
// now and its rules' paths lead where they led then. A call's child opens its rules itself, so
// a stale entry could only lack a rule for a new entry (unreadable, fail closed); but a pooled
// init opened its prebuilt base before the call, and the same entry is what lets that base
// stand for the call's (landlockHint.matches): a directory changed meanwhile (an entry renamed
// over another, a directory swapped with a sibling) must never pass for unchanged.
//
// The ctime is what a stale directory cannot fool: adding, removing or renaming an entry sets
// it to now, and no user can set it back (utimes sets the mtime the owner asks for, and the
// ctime to now). Its clock is coarse (a tick of a few ms), so a second change in the tick of
// the stamp would leave it as it was: an entry is kept only when each directory's ctime was
// older than stampSlack when it was stamped, and any change after that moves it.
type expansionCache struct {
	slack   time.Duration // stampSlack; tests set their own
	mu      sync.Mutex
	entries map[string]*expansion
}

func newExpansionCache(slack time.Duration) *expansionCache {
	return &expansionCache{slack: slack, entries: map[string]*expansion{}}
}

type expansion struct {
	rules []llRule
	dirs  []dirStamp
}

// dirStamp identifies a directory's contents as of a listing.
type dirStamp struct {
	path             string
	dev, ino         uint64
	mtimeNs, ctimeNs int64
}

// stampSlack is longer than any filesystem's timestamp granularity (the kernel's coarse clock
// ticks every few ms). Tests, whose fixtures live under busy directories, set their own.
const stampSlack = 100 * time.Millisecond

// maxExpansions bounds the cache (one entry per distinct root and deny set); full, it starts over.
const maxExpansions = 256

func stampOf(path string) (dirStamp, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return dirStamp{}, false
	}
	return dirStamp{path: path, dev: st.Dev, ino: st.Ino, mtimeNs: st.Mtim.Nano(), ctimeNs: st.Ctim.Nano()}, true
}

// get returns the rules expandAround builds for root now, and the cache entry they came from:
// the same entry means directories unchanged since, so the same inodes behind each rule's
// path (nil when the listing was too recent to keep).
func (c *expansionCache) get(root string, access uint64, deny []string) ([]llRule, *expansion, error) {
	key := root + "\x00" + strconv.FormatUint(access, 16) + "\x00" + strings.Join(deny, "\x00")
	c.mu.Lock()
	e := c.entries[key]
	c.mu.Unlock()
	if e != nil && e.fresh() {
		return e.rules, e, nil
	}
	var dirs []dirStamp
	cacheable := true
	rules, err := expandAround(root, access, deny, func(dir string) {
		st, ok := stampOf(dir)
		// A directory changed within the slack could change again within the same tick, its
		// ctime not moving: such a listing is used once, not kept. Judged by the ctime, which
		// its owner cannot set back as the mtime can be.
		recent := time.Now().UnixNano()-st.ctimeNs < int64(c.slack)
		cacheable = cacheable && ok && !recent
		dirs = append(dirs, st)
	})
	if err != nil {
		return nil, nil, err
	}
	if !cacheable {
		return rules, nil, nil
	}
	e = &expansion{rules: rules, dirs: dirs}
	c.mu.Lock()
	if len(c.entries) >= maxExpansions {
		c.entries = map[string]*expansion{}
	}
	c.entries[key] = e
	c.mu.Unlock()
	return rules, e, nil
}

// fresh reports whether every directory the expansion listed is unchanged. The stamp is taken
// before the listing, so a change during it makes the entry stale, never wrongly fresh.
func (e *expansion) fresh() bool {
	return fresh(e.dirs)
}

// expandAround grants access on root, except that a deny path beneath root must not inherit
// it: landlock has no deny rule, so the ancestors of a deny path get only READ_DIR (listing)
// and each of their other entries gets access. A deny path created later therefore matches no
// rule and stays unreadable; so does anything created later directly in such an ancestor. An
// entry that is a symlink gets no rule in the child (nsinit_landlock.c): one on what it leads
// to could reach a deny path. listed, when set, is told each directory about to be listed.
func expandAround(root string, access uint64, deny []string, listed func(dir string)) ([]llRule, error) {
	var inside []string
	for _, d := range deny {
		if under(root, d) {
			return nil, nil // root itself is denied
		}
		if under(d, root) {
			inside = append(inside, d)
		}
	}
	if len(inside) == 0 {
		return []llRule{{access: access, path: root}}, nil
	}
	rules := []llRule{{access: access & llReadDir, path: root}}
	if listed != nil {
		listed(root)
	}
	// A directory only, opened without blocking: the user can put a FIFO where a deny path's
	// ancestor was, and open(2) of one waits for a writer.
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return rules, nil // nothing to list; nothing to allow below
	}
	f := os.NewFile(uintptr(fd), root)
	names, err := f.Readdirnames(maxDenyExpand + 1)
	f.Close()
	if len(names) > maxDenyExpand {
		return nil, fmt.Errorf("%w: %s has too many entries to deny inside it", ErrBadSpec, root)
	}
	sort.Strings(names)
	for _, n := range names {
		r, err := expandAround(filepath.Join(root, n), access, inside, listed)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r...)
	}
	return rules, nil
}

// denied reports whether p is a deny path or lies beneath one.
func denied(p string, deny []string) bool {
	for _, d := range deny {
		if under(p, d) {
			return true
		}
	}
	return false
}

// appearLater picks the deny paths that need landlock to keep them denied if they appear
// while the call runs: those that do not exist yet and would be created in a directory the
// caller owns (~/.aws, made later by the user's own tools). A deny path that exists is hidden
// by the mount plan; one whose nearest existing directory belongs to someone else (a root-owned
// /run for a docker socket) cannot be made by the call, and a socket another user makes there
// is not a landlock matter anyway (landlock does not govern connect). Expanding around every
// deny path would be costly on every call: each expansion lists a directory in the parent and
// adds a rule per entry in the child.
//
// WARNING: decides which deny paths landlock guards; rerun as root after changing:
// go test -run 'TestEscape|TestPoolEscape|TestLandlock' ./sandbox/
//
// One that exists outside the writable dirs, in a dir the caller owns, is picked too: a mount
// hides the file it was made on, and one the user's tool saves in its place (a rename over
// ~/.aws/credentials) would show. Expanded around, the new one matches no rule; the cover
// itself gets a rule of the call's (opened after the mounts: it binds the cover), so it still
// reads as empty.
func appearLater(v *fsView, deny, writable []string, uid uint32) (out, covered []string) {
	for _, d := range deny {
		if _, err := v.lstat(d); err == nil {
			if !slices.ContainsFunc(writable, func(w string) bool { return under(d, w) }) && ownDir(v, filepath.Dir(d), uid) {
				out, covered = append(out, d), append(covered, d)
			}
			continue
		}
		dir := filepath.Dir(d)
		for dir != "/" {
			if _, err := v.lstat(dir); err == nil {
				break
			}
			dir = filepath.Dir(dir)
		}
		fi, err := v.lstat(dir)
		if err != nil {
			out = append(out, d) // cannot tell: keep the protection
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid == uid {
			out = append(out, d)
		}
	}
	return out, covered
}

// ownDir reports whether the dir d is the caller's (or cannot be told).
func ownDir(v *fsView, d string, uid uint32) bool {
	fi, err := v.lstat(d)
	if err != nil {
		return true
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || st.Uid == uid
}
