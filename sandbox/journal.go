package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// A call's sweep journal: what its sweeps look at (the protected paths missing when it started,
// and, by inode, those there then), kept in Config.JournalDir from its first sweep while it runs
// (sweepInterval in) until its last. A daemon killed while calls ran (SIGKILL, a crash, a stop
// that outlasted systemd's timeout) never swept after them, and what a background task made
// there (an .envrc, a hook) would stay for the user's tools to run: the next daemon sweeps what
// the journals left (RecoverJournals) before it serves. A call that ends before its first sweep
// (most do) writes none: a journal is a file of tens of KB, whose making and removal cost about
// what the call's whole plan does. So a crash in a call's first half second leaves what it made
// by then, as the log's unfinished calls say. Not synced: the page cache outlives the daemon,
// and a power loss ends the calls too.

// journalSeq names journals uniquely in this process; the pid keeps two daemons apart.
var journalSeq atomic.Uint64

// maxJournalBytes bounds what a journal is read to: a plan's candidates, well past any real one.
const maxJournalBytes = 16 << 20

type journalEntry struct {
	UID     uint32   `json:"uid"`
	GID     uint32   `json:"gid"`
	Groups  []uint32 `json:"groups,omitempty"`
	Session string   `json:"session,omitempty"`
	Call    string   `json:"call,omitempty"`
	Start   int64    `json:"start"` // unix nanoseconds
	// Roots are the writable dirs the paths lie below, each named once.
	Roots  []string       `json:"roots"`
	Guard  []journalGuard `json:"guard,omitempty"`
	Covers []journalCover `json:"covers,omitempty"`
}

type journalGuard struct {
	Root   int    `json:"r"`
	Rel    string `json:"p"`
	Link   string `json:"l,omitempty"`
	Target string `json:"t,omitempty"`
	Keep   bool   `json:"k,omitempty"`
}

type journalCover struct {
	Root int    `json:"r"`
	Rel  string `json:"p"`
	Dev  uint64 `json:"d"`
	Ino  uint64 `json:"i"`
	// Ctime (ns) tells a file put in its place under the same inode number, which ext4 hands
	// out again at once: the call's held descriptor, which keeps the number taken, is gone
	// with the daemon.
	Ctime int64 `json:"c,omitempty"`
}

// journal writes p's sweep journal. Nothing to write for a call that guards nothing.
func (s *Sandbox) journal(p *Process) error {
	if s.cfg.JournalDir == "" || !p.spec.MoveAsideCreated || len(p.guard) == 0 && len(p.covers) == 0 {
		return nil
	}
	e := journalEntry{UID: p.spec.UID, GID: p.spec.GID, Groups: p.spec.Groups, Session: p.spec.Session,
		Call: p.spec.Call, Start: time.Now().UnixNano()}
	roots := map[string]int{}
	root := func(r string) int {
		i, ok := roots[r]
		if !ok {
			i = len(e.Roots)
			roots[r] = i
			e.Roots = append(e.Roots, r)
		}
		return i
	}
	for _, g := range p.guard {
		e.Guard = append(e.Guard, journalGuard{Root: root(g.root), Rel: g.rel, Link: g.link, Target: g.target, Keep: g.keep})
	}
	for _, c := range p.covers {
		jc := journalCover{Root: root(c.root), Rel: c.rel, Dev: c.dev, Ino: c.ino}
		var st unix.Stat_t
		if c.fd >= 0 && unix.Fstat(c.fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			jc.Ctime = st.Ctim.Nano() // a file's only: a dir's moves as its entries change
		}
		e.Covers = append(e.Covers, jc)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	name := filepath.Join(s.cfg.JournalDir, strconv.Itoa(os.Getpid())+"."+strconv.FormatUint(journalSeq.Add(1), 10)+".json")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write the call's sweep journal: %w", err)
	}
	_, werr := f.Write(b)
	if err := errors.Join(werr, f.Close()); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write the call's sweep journal: %w", err)
	}
	p.journalPath = name
	return nil
}

// unjournal removes p's journal: its last sweep is over.
func (p *Process) unjournal() {
	if p.journalPath == "" {
		return
	}
	if err := os.Remove(p.journalPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.s.log.Warn("remove a call's sweep journal", zap.String("path", p.journalPath), zap.Error(err))
	}
	p.journalPath = ""
}

// Recovered is what the sweep of one journal a dead daemon left moved aside.
type Recovered struct {
	UID     uint32
	Session string
	Call    string
	// Moved are the paths moved aside (as ShownPath gives them), MovedMore how many more.
	Moved     []string
	MovedMore int
}

// RecoverJournals sweeps after the calls a previous daemon left running (see journal): each
// protected path one made is moved aside, as its last sweep would have, as its caller, and its
// journal removed. Run at start, before any call of this daemon's. A journal that cannot be
// read is logged and removed: nothing in it could be swept.
func (s *Sandbox) RecoverJournals() []Recovered {
	dir := s.cfg.JournalDir
	if dir == "" {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("read the sweep journals", zap.Error(err))
		}
		return nil
	}
	own := strconv.Itoa(os.Getpid()) + "."
	var out []Recovered
	for _, ent := range ents {
		if !strings.HasSuffix(ent.Name(), ".json") || strings.HasPrefix(ent.Name(), own) {
			continue
		}
		path := filepath.Join(dir, ent.Name())
		e, alive, err := readJournal(path)
		if err != nil {
			s.log.Warn("a sweep journal left by a previous daemon could not be read; what its call made is not swept",
				zap.String("path", path), zap.Error(err))
		} else if r, ok := s.sweepJournal(e, alive); ok {
			out = append(out, r)
		}
		if err := os.Remove(path); err != nil {
			s.log.Warn("remove a sweep journal", zap.String("path", path), zap.Error(err))
		}
	}
	return out
}

// readJournal reads the journal at path, and when its call was last swept (its mtime).
func readJournal(path string) (*journalEntry, time.Time, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxJournalBytes+1))
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(b) > maxJournalBytes {
		return nil, time.Time{}, fmt.Errorf("larger than %d bytes", maxJournalBytes)
	}
	var e journalEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, time.Time{}, err
	}
	return &e, fi.ModTime(), nil
}

// journalSlack is how long past a journal's last sweep a path may have been made by its call:
// the sweeps' interval, and a timestamp's tick.
const journalSlack = sweepInterval + time.Second

// sweepJournal runs e's call's last sweep again: its guarded and covered paths only (the
// walks for Edit deny patterns and submodules need what the plan saw, which the journal does
// not keep). What was made or changed past alive (the call's last sweep, when the daemon was
// still there) plus journalSlack, or is another user's, is no call's: the daemon may come back
// hours after it died, and the user's own files, or another's in a shared dir, stay. false when
// e names a root out of range: a journal the daemon did not write.
func (s *Sandbox) sweepJournal(e *journalEntry, alive time.Time) (Recovered, bool) {
	p := &Process{s: s, spec: Spec{UID: e.UID, GID: e.GID, Groups: e.Groups, Session: e.Session, Call: e.Call, MoveAsideCreated: true},
		start: time.Unix(0, e.Start), mntns: -1}
	for _, g := range e.Guard {
		if g.Root < 0 || g.Root >= len(e.Roots) {
			return Recovered{}, false
		}
		p.guard = append(p.guard, guarded{root: e.Roots[g.Root], rel: g.Rel, link: g.Link, target: g.Target, keep: g.Keep})
	}
	for _, c := range e.Covers {
		if c.Root < 0 || c.Root >= len(e.Roots) {
			return Recovered{}, false
		}
		p.covers = append(p.covers, covered{root: e.Roots[c.Root], rel: c.Rel, pinned: pinned{dev: c.Dev, ino: c.Ino, fd: -1}})
	}
	// A covered file changed since (its ctime moved) may be a new file under the old number:
	// taken for replaced, it is moved aside, as the sweep does with one it cannot tell. Looked
	// at as the caller.
	until := alive.Add(journalSlack).UnixNano()
	theCalls := func(st *unix.Stat_t) bool { return st.Uid == e.UID && st.Ctim.Nano() <= until }
	_ = asCaller(e.UID, e.GID, e.Groups, func() {
		var st unix.Stat_t
		for i, c := range e.Covers {
			err := unix.Lstat(filepath.Join(e.Roots[c.Root], c.Rel), &st)
			switch {
			case err == nil && !theCalls(&st):
				p.covers[i].ino, p.covers[i].dev = st.Ino, st.Dev // left as it is
			case err == nil && c.Ctime != 0 && st.Ctim.Nano() != c.Ctime:
				p.covers[i].ino = 0
			}
		}
		p.guard = slices.DeleteFunc(p.guard, func(g guarded) bool {
			return unix.Lstat(filepath.Join(g.root, g.rel), &st) == nil && !theCalls(&st)
		})
	})
	p.moveAsideCreated(false)
	r := Recovered{UID: e.UID, Session: e.Session, Call: e.Call, MovedMore: p.movedMore}
	for _, m := range p.moved {
		r.Moved = append(r.Moved, ShownPath(m))
	}
	if len(r.Moved) > 0 {
		s.log.Warn("a call the previous daemon left running had made protected paths; moved aside",
			zap.Uint32("uid", e.UID), zap.String("call", e.Call), zap.Strings("moved", r.Moved))
	}
	return r, true
}
