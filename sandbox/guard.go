package sandbox

import (
	"crypto/rand"
	"errors"
	"hash/maphash"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// guarded is a protected path that did not exist when a call started: rel below the writable
// dir root. Or, with link set, one that was the user's symlink (link what it says): a mount
// cannot hold a link in place, so anything else at its name when the sweep looks was put
// there. Not told by its inode: a link removed and made again often gets the same number.
//
// With target set, rel was the user's symlink, leading to target, on the way to a path a Read
// deny hides (Read(./secrets/**) with secrets -> ~/vault): the mounts hide where it leads, but
// a call may remove or retarget the link, and the next call would then hide wherever the new
// one leads and show ~/vault. So the sweep puts the user's link back (keepLink).
type guarded struct {
	root, rel string
	link      string
	target    string
	// keep: a person approved the call to write this very path (Spec.KeepCreated), so a
	// regular file made there stays; a dir, link or anything else is moved aside all the same
	// (what a new .claude holds went unseen).
	keep bool
}

// is reports whether g is the absolute path p, without building g's path.
func (g guarded) is(p string) bool {
	r := strings.TrimSuffix(g.root, "/")
	return len(p) == len(r)+1+len(g.rel) && strings.HasPrefix(p, r) && p[len(r)] == '/' && p[len(r)+1:] == g.rel
}

// guardSet holds what each running call guards (its protected paths that were missing when
// it started, so it moves them aside). A call that starts while such a path exists must not
// take it for the user's: mounted read-only, it would find the name free once the other
// call's sweep moved it away (a rename moves the mount along), and keep what it wrote there.
// So it guards the path too.
//
// Likewise, a match of an Edit deny pattern that another call made was there when this call
// started, so mounted read-only and taken for the user's (patternGuard.had); once a sweep
// moved it (moved), what this call makes at its name is this call's.
type guardSet struct {
	mu    sync.Mutex
	calls map[*Process]guardEntry
	moved map[string]time.Time // what sweeps moved aside while a call that started before ran
}

// guardEntry is one running call's guarded paths, whose call they are, and when they were
// recorded: before the call started, so no earlier than what it made (Process.start is its
// own goroutines').
type guardEntry struct {
	guard []guarded
	uid   uint32
	since time.Time
}

// guardLists are the running calls' guarded paths, as a plan saw them before it looked at any.
type guardLists [][]guarded

// snapshot is what the running calls of uid guard. Only the user's own: the layer keeps a
// user's agent from planting what that user's programs trust, and another user's call, in
// dirs it may not even write, neither makes this user's paths nor vouches for them (a call
// of B's in A's project would have A's new settings refused and A's own calls move them
// aside). What another user may write there is the dir's permissions' business.
func (gs *guardSet) snapshot(uid uint32) guardLists {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var out guardLists
	for _, e := range gs.calls {
		if e.uid == uid {
			out = append(out, e.guard)
		}
	}
	return out
}

// start records what p guards, until done.
func (gs *guardSet) start(p *Process) {
	if len(p.guard) == 0 && p.guardWalk == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.calls == nil {
		gs.calls = map[*Process]guardEntry{}
	}
	gs.calls[p] = guardEntry{guard: p.guard, uid: p.spec.UID, since: time.Now()}
}

func (gs *guardSet) done(p *Process) {
	if len(p.guard) == 0 && p.guardWalk == nil {
		return
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.calls, p)
	if len(gs.calls) == 0 {
		gs.moved = nil
	}
}

// movedAside notes that a sweep moved path aside now; it matters only to the calls running.
func (gs *guardSet) movedAside(path string) {
	now := time.Now()
	gs.mu.Lock()
	defer gs.mu.Unlock()
	oldest := now
	for _, e := range gs.calls {
		if e.since.Before(oldest) {
			oldest = e.since
		}
	}
	if gs.moved == nil {
		gs.moved = map[string]time.Time{}
	}
	for q, t := range gs.moved {
		if t.Before(oldest) {
			delete(gs.moved, q)
		}
	}
	gs.moved[path] = now
}

// movedSince reports whether a sweep moved path aside since t.
func (gs *guardSet) movedSince(path string, t time.Time) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	m, ok := gs.moved[path]
	return ok && !m.Before(t)
}

// MadeByRunningCall reports whether the absolute path p, or a dir it lies in, is a protected
// path a call of uid's still running made (it was missing when the call started), which that
// call's sweep is about to move aside. The daemon does not trust such a file (the user's or a
// project's settings) meanwhile.
func (s *Sandbox) MadeByRunningCall(p string, uid uint32) bool {
	ls := s.guarding.snapshot(uid)
	if ls == nil {
		return false
	}
	for p = filepath.Clean(p); ; p = filepath.Dir(p) {
		if ls.has(p) {
			return true
		}
		if p == "/" || p == "." {
			return false
		}
	}
}

// has reports whether a running call guards the absolute path p, missing at its start.
func (ls guardLists) has(p string) bool {
	for _, l := range ls {
		for _, g := range l {
			if g.link == "" && g.target == "" && !g.keep && g.is(p) {
				return true
			}
		}
	}
	return false
}

// guardable returns c as a guarded path when it lies inside one of writable and a call could
// make it: not inside a repository's .git that does not exist yet, since `git init` and
// `git clone` make a new one whole; that .git itself is guarded, and what in it would run
// code is moved aside (unsafeInNewRepo).
func guardable(v *fsView, c string, writable []string) (guarded, bool) {
	if i := strings.Index(c, "/.git/"); i >= 0 {
		if _, err := v.lstat(c[:i+len("/.git")]); err != nil {
			return guarded{}, false
		}
	}
	for _, w := range writable {
		if under(c, w) && c != w {
			return guarded{root: w, rel: strings.TrimPrefix(c[len(w):], "/")}, true
		}
	}
	return guarded{}, false
}

// ctimeSlack is how far before a call's start a ctime still counts as the call's: the kernel
// stamps ctimes from a clock that may lag the one the start was read from by a tick.
const ctimeSlack = 10 * time.Millisecond

// BlockedSuffix names what a protected path a call made is moved aside to: NAME + suffix +
// the call's id, beside it, where nothing that trusts NAME looks.
const BlockedSuffix = ".sandboxd-blocked-"

// sweepInterval is how often a running call's guarded paths are looked at: what a long call
// or a background task makes is moved aside within about this long, not only when it ends (an
// agent or shell started meanwhile would trust it).
const sweepInterval = 500 * time.Millisecond

// KilledRemade is the kill reason (Result.KilledBy) of a call that made a protected path again
// after a sweep moved it aside while the call ran. One creation may be a tool's accident; a
// program that makes the path again as soon as it is moved would keep it there most of the
// time, where the user's git, shell or editor would trust it.
const KilledRemade = "protected_path_remade"

// sweepWhileRunning moves aside what the call made at guarded paths so far, every
// sweepInterval until the child is reaped. Wait waits for it (sweepDone) before its last sweep.
func (p *Process) sweepWhileRunning() {
	defer close(p.sweepDone)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			if p.journalPath == "" {
				// A call still running at its first sweep is journaled (journal.go): one
				// that ends sooner costs none.
				if err := p.s.journal(p); err != nil {
					p.s.log.Warn("a running call's sweep journal could not be written; a restart after a crash would not sweep after it",
						zap.String("call", p.spec.Call), zap.Error(err))
				}
			} else {
				// Its mtime says until when the daemon swept: what appeared later is no
				// call's (RecoverJournals).
				_ = unix.UtimesNanoAt(unix.AT_FDCWD, p.journalPath, nil, 0)
			}
			p.moveAsideCreated(true)
		}
	}
}

// lastSweep runs once every process of the call is gone, and returns the paths moved aside
// while it ran and now, as Result reports them, and how many more it moved.
func (p *Process) lastSweep() ([]string, int) {
	if len(p.guard) == 0 && len(p.repos) == 0 && p.guardWalk == nil && len(p.covers) == 0 {
		return nil, 0
	}
	<-p.sweepDone
	p.moveAsideCreated(false)
	shown := make([]string, len(p.moved))
	for i, m := range p.moved {
		shown[i] = ShownPath(m)
	}
	return shown, p.movedMore
}

// Bounds of the paths a call's result names as moved aside (each one moved all the same): a
// call can make thousands at paths of 4 KiB, which the result, the audit record and the
// daemon's memory until the call ends would otherwise hold whole.
const (
	maxMovedListed      = 256
	maxMovedListedBytes = 64 << 10
)

// noteMoved records that path was moved aside, and reports whether it had been before in this
// call (it was made again). Every path is remembered, by a hash (a loop that remakes one past
// the listed few hundred is a loop all the same); past the bounds it is only counted.
func (p *Process) noteMoved(path string) (again bool) {
	if p.movedSet == nil {
		p.movedSet, p.movedSeed = map[uint64]bool{}, maphash.MakeSeed()
	}
	h := maphash.String(p.movedSeed, path)
	if p.movedSet[h] {
		return true
	}
	p.movedSet[h] = true
	if len(p.moved) >= maxMovedListed || p.movedBytes+len(path) > maxMovedListedBytes {
		p.movedMore++
		return false
	}
	p.moved = append(p.moved, path)
	p.movedBytes += len(path)
	return false
}

// ShownPath is a path as a result or a record names it: as it is, or, when it is not valid
// UTF-8 or holds a quote or a backslash, Go-quoted (it then starts with a quote, which an
// absolute path never does), so two names that differ only in bytes JSON cannot carry stay two.
func ShownPath(p string) string {
	if utf8.ValidString(p) && !strings.ContainsAny(p, `"\`) {
		return p
	}
	return strconv.Quote(p)
}

// KilledCoverLost is the kill reason of a call whose read-only cover of a protected path was
// dropped by the path's replacement (moveAsideCreated): from then on it could write there.
const KilledCoverLost = "protected_path_replaced"

// isGitConfig reports a repository's config file among the protected paths.
func isGitConfig(rel string) bool {
	return rel == ".git/config" || strings.HasSuffix(rel, "/.git/config") ||
		rel == ".git/config.worktree" || strings.HasSuffix(rel, "/.git/config.worktree")
}

// covered is a protected path that existed when a call started, mounted read-only in it, and
// the file or dir the mount covers, held open so that no other can take its inode number.
type covered struct {
	root, rel string
	pinned
}

// unpinCovers closes what coversOf and hiddenOf held open, once the call's sweeps are over (or
// it never started). Once: a failed start's abort releases the call too.
func (p *Process) unpinCovers() {
	p.unpinOnce.Do(func() {
		if p.sweepDone != nil {
			<-p.sweepDone
		}
		for _, c := range p.covers {
			unix.Close(c.fd)
		}
		for _, h := range p.hidden {
			if h.fd >= 0 {
				unix.Close(h.fd)
			}
		}
		p.s.pins.give(p.spec.tenant(), p.pins)
	})
}

// hiddenPath is a path every mount of the call hides that existed when it started (a deny
// path, a socket), and the file or dir the mount covers, held open like a covered one; or,
// with fd -1, a deny path outside the writable dirs that was missing then (hiddenLost).
type hiddenPath struct {
	path string
	pinned
	// expanded: missing, and landlock expands around it (appearLater), so a file made there
	// after the call started matches no rule; one born earlier and moved in keeps its own.
	expanded bool
}

// bornSince reports whether the file at p (followed) was made at since or later, by its birth
// time; false where the file system does not say.
func bornSince(p string, since time.Time) bool {
	var stx unix.Statx_t
	if unix.Statx(unix.AT_FDCWD, p, unix.AT_STATX_SYNC_AS_STAT, unix.STATX_BTIME, &stx) != nil || stx.Mask&unix.STATX_BTIME == 0 {
		return false
	}
	return !time.Unix(stx.Btime.Sec, int64(stx.Btime.Nsec)).Before(since)
}

// KilledHiddenLost is the kill reason of a call whose cover of a hidden path (a deny path, a
// socket every call hides) was dropped by the path's replacement on the host, or one of whose
// missing deny paths appeared (hiddenLost): from then on the call could read or connect there.
const KilledHiddenLost = "hidden_path_replaced"

// HiddenLost returns the first path p hides that is no longer hidden from it (replaced on the
// host, or, with Spec.WatchHidden, appeared since it started), "" when none is. Looked at as
// the caller.
func (p *Process) HiddenLost() (lost string, err error) {
	err = asCaller(p.spec.UID, p.spec.GID, p.spec.Groups, func() { lost = p.hiddenLost() })
	return lost, err
}

// hiddenLost returns the first hidden path that is no longer what the call's mount covers,
// "" when every one is. Run as the caller.
func (p *Process) hiddenLost() string {
	for _, h := range p.hidden {
		var st unix.Stat_t
		// Followed, as the plan and the mount did. Gone exposes nothing (a logout removes
		// /run/user/<uid>): what is made there again is caught by the next sweep. One the
		// caller can no longer look at may have been made unreadable by the call itself.
		err := unix.Stat(h.path, &st)
		if err == unix.ENOENT || err == unix.ENOTDIR || err == nil && h.fd >= 0 && st.Ino == h.ino && st.Dev == h.dev ||
			err != nil && h.fd < 0 || // missing at the start: only its appearance counts
			err == nil && h.fd < 0 && h.expanded && bornSince(h.path, p.rulesAt) {
			continue
		}
		return h.path
	}
	return ""
}

// moveAsideCreated moves aside each guarded path that exists: the call made it, in a way its
// decision did not see (a visible write to a protected path asks). It runs as the caller, and
// reaches each path from its writable dir without following a symlink, so nothing the call
// left can point it elsewhere. Adds what it moved to p.moved. While the call runs, a path
// moved aside before and made again kills the call (KilledRemade).
//
// WARNING: writes in the caller's dirs; rerun as root after changing:
// go test -run 'TestMoveAside' ./sandbox/
func (p *Process) moveAsideCreated(running bool) {
	remade, replaced, unhidden := "", "", ""
	defer func() {
		// As the daemon, not the caller: the cgroup is root's.
		switch {
		case unhidden != "":
			p.s.log.Warn("a hidden path was replaced, or appeared, while a call ran, which would show it to the call; killing the call",
				zap.String("path", unhidden), zap.String("call", p.spec.Call))
			_ = p.Kill(KilledHiddenLost)
		case replaced != "" && running:
			p.s.log.Warn("a protected path was replaced while a call ran, which drops its read-only cover there; killing the call and moving the path aside",
				zap.String("path", replaced), zap.String("call", p.spec.Call))
			_ = p.Kill(KilledCoverLost)
		case remade != "":
			p.s.log.Warn("a call made a protected path again after it was moved aside; killing the call",
				zap.String("path", remade), zap.String("call", p.spec.Call))
			_ = p.Kill(KilledRemade)
		}
	}()
	err := asCaller(p.spec.UID, p.spec.GID, p.spec.Groups, func() {
		if running {
			// Once the call is over there is nothing left to read a hidden path.
			unhidden = p.hiddenLost()
		}
		roots := map[string]int{}
		defer func() {
			for _, fd := range roots {
				if fd >= 0 {
					unix.Close(fd)
				}
			}
		}()
		rootFD := func(root string) (int, bool) {
			rfd, ok := roots[root]
			if !ok {
				var err error
				// Once per root and call: a root that failed stays failed (-1), and one that
				// does not exist (a cache dir the user never made) holds nothing to move.
				rfd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				// Out of descriptors is the daemon's state, not the dir's: the last look
				// waits for some (up to a second) rather than leave what the call made.
				for i := 0; !running && (err == unix.EMFILE || err == unix.ENFILE) && i < 50; i++ {
					time.Sleep(20 * time.Millisecond)
					rfd, err = unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				}
				if err != nil {
					rfd = -1
				}
				if err != nil && !errors.Is(err, unix.ENOENT) {
					p.s.log.Warn("a writable dir could not be opened to look for protected paths the call made",
						zap.String("dir", root), zap.Error(err))
				}
				roots[root] = rfd
			}
			return rfd, rfd >= 0
		}
		moveOne := func(rfd int, rel string) (string, string, error) {
			dir, name := filepath.Split(rel)
			return moveAside(rfd, strings.TrimSuffix(dir, "/"), name, p.spec.Call, p.start.Add(-ctimeSlack))
		}
		move := func(rfd int, root, rel string) {
			movedRel, asideRel, err := moveOne(rfd, rel)
			if errors.Is(err, errOldLink) {
				// Behind a link that was there before, where it leads now: the plan resolved it
				// when the call started, and the call may have made what it leads to since
				// (an earlier call's .cargo -> c, with no c then).
				err = fs.ErrNotExist
				if r := resolve(newFSView(), filepath.Join(root, rel)); r != filepath.Join(root, rel) {
					for _, w := range p.writable {
						if under(r, w) && r != w {
							if wfd, ok := rootFD(w); ok {
								root = w
								movedRel, asideRel, err = moveOne(wfd, r[len(w)+1:])
							}
							break
						}
					}
				}
				if errors.Is(err, errOldLink) {
					err = fs.ErrNotExist
				}
			}
			path := filepath.Join(root, movedRel)
			switch {
			case err == nil:
				p.gitStart(root).asides[asideRel] = true
				p.s.guarding.movedAside(path)
				if p.noteMoved(path) && running && remade == "" {
					remade = path
				}
			case !errors.Is(err, fs.ErrNotExist):
				p.s.log.Warn("a protected path the call made could not be moved aside",
					zap.String("path", path), zap.Error(err))
			}
		}
		// A dir that holds several guarded paths is read whole once: most were not made, and
		// one getdents answers for all of them.
		perDir := map[guarded]int{}
		for _, g := range p.guard {
			perDir[guarded{root: g.root, rel: filepath.Dir(g.rel)}]++
		}
		listed := map[guarded]map[string]bool{}
		namesOf := func(rfd int, holder guarded) map[string]bool {
			names, ok := listed[holder]
			if !ok {
				names = namesIn(rfd, holder.rel)
				listed[holder] = names
			}
			return names
		}
		for _, g := range p.guard {
			rfd, ok := rootFD(g.root)
			if !ok {
				continue
			}
			if g.target != "" {
				if keepLink(rfd, g.rel, g.target, p.spec.Call) {
					if path := filepath.Join(g.root, g.rel); p.noteMoved(path) && running && remade == "" {
						remade = path
					}
				}
				continue
			}
			holder := guarded{root: g.root, rel: filepath.Dir(g.rel)}
			if perDir[holder] >= 3 {
				if names := namesOf(rfd, holder); names != nil && !names[filepath.Base(g.rel)] {
					continue
				}
			} else if top, _, below := strings.Cut(g.rel, "/"); below && perDir[guarded{root: g.root, rel: "."}] >= 3 {
				// Most deeper ones lie in a dir the root does not hold (.cargo, .mvn/wrapper,
				// .yarn/releases): its listing answers for everything below it.
				if names := namesOf(rfd, guarded{root: g.root, rel: "."}); names != nil && !names[top] {
					continue
				}
			}
			if !mayExist(rfd, g.rel) || g.link != "" && isLink(rfd, g.rel, g.link) || g.keep && isFileBeneath(rfd, g.rel) {
				continue
			}
			rels := []string{g.rel}
			if filepath.Base(g.rel) == ".git" && isDirBeneath(rfd, g.rel) {
				rels = unsafeInNewRepo(rfd, g.rel) // a new repository; a .git file or link goes
			}
			for _, rel := range rels {
				move(rfd, g.root, rel)
			}
		}
		// A protected path that existed is covered by a read-only mount on its dentry. A rename
		// over it or an unlink and create (git config, an editor's save, git checkout) drops
		// that mount in the call's namespace, and the call can write the new file: once it is
		// no longer the one covered, the call is killed and it is moved aside.
		for _, c := range p.covers {
			rfd, ok := rootFD(c.root)
			if !ok {
				continue
			}
			// A dir on the way the call made unsearchable (chmod 000 scripts around each sweep)
			// gets its search bit back; one the sweep still cannot look at counts as replaced.
			var st unix.Stat_t
			err := unix.Fstatat(rfd, c.rel, &st, unix.AT_SYMLINK_NOFOLLOW)
			if err != nil && err != unix.ENOENT {
				st, err = lstatOpening(rfd, c.rel)
			}
			if err == nil && st.Ino == c.ino && st.Dev == c.dev {
				continue
			}
			path := filepath.Join(c.root, c.rel)
			// Another call's sweep may have moved it aside: what this call then makes there is
			// moved aside by its own guards if it guards the path (it was another call's when
			// this one started) or an Edit deny pattern of its own names it, outside a .git dir
			// (the pattern walk leaves a repository's .git to the plan). Otherwise nothing here
			// would, and the call is killed as for a replacement.
			if slices.ContainsFunc(p.guard, func(g guarded) bool { return g.is(path) }) ||
				p.s.guarding.movedSince(path, p.start) && p.guardWalk != nil && p.guardWalk.names(path) &&
					!strings.Contains("/"+c.rel+"/", "/.git/") {
				continue
			}
			if replaced == "" {
				replaced = path
			}
			// A git config that holds nothing that runs code is left to the user (git config
			// user.name, git push -u): the kill ends the call's chance to write it. One that
			// cannot be looked at is moved aside whatever it is (moveAside opens the way).
			noWorktree := func(string) bool { return false }
			if err != nil && err != unix.ENOENT || err == nil && !(isGitConfig(c.rel) && safeGitConfigAt(rfd, c.rel, noWorktree)) {
				move(rfd, c.root, c.rel)
			}
		}
		// A new match of an Edit deny pattern (Edit(src/**) where there was no src). The walk
		// is the daemon's CPU: while the call runs it takes at most a twentieth of the time
		// (a walk of 100 ms waits 2 s for the next), and waits while its user's walks are
		// over their share (walkShare); the last look always walks.
		if p.guardWalk != nil && running && !time.Now().Before(p.walkNext) {
			if wait := walkShare.wait(p.spec.tenant()); wait > 0 {
				p.walkNext = time.Now().Add(wait)
			}
		}
		if pg := p.guardWalk; pg != nil && (!running || !time.Now().Before(p.walkNext)) {
			movedSince := func(h string) bool { return p.s.guarding.movedSince(h, p.start) }
			began := time.Now()
			made := pg.made(p.spec.UID, p.spec.tenant(), p.s.log, movedSince, !running)
			p.walkNext = time.Now().Add(20 * time.Since(began))
			for _, m := range made {
				for _, w := range pg.roots {
					if under(m, w) && m != w {
						if rfd, ok := rootFD(w); ok {
							move(rfd, w, m[len(w)+1:])
						}
						break
					}
				}
			}
		}
		// A submodule's .git the call made or changed: the user's git status runs git there.
		// While the call runs, an index read waits while its user's share of the daemon's CPU
		// is spent (a call touching a 256 MB index every half second); the last look reads.
		repos := p.repos
		if running && walkShare.wait(p.spec.tenant()) > 0 {
			repos = nil
		}
		for i, r := range repos {
			rfd, ok := rootFD(r.root)
			if !ok {
				continue
			}
			gits, err := p.s.gitlinks.gitlinkGits(p.spec.tenant(), rfd, r.rel, p.start.Add(-ctimeSlack), p.repoLinks[i])
			if err != nil {
				p.s.log.Warn("a repository's index could not be read to look at its submodules; moved aside if the call changed it",
					zap.String("dir", filepath.Join(r.root, r.rel)), zap.Error(err))
			}
			for _, g := range gits {
				move(rfd, r.root, g)
			}
			// Its git dir, wherever it lies in the writable dirs (a separate git dir, one
			// reached through a link).
			root, gd, ok := gitDirOf(newFSView(), filepath.Join(r.root, r.rel), p.writable)
			if !ok {
				continue
			}
			gfd, ok := rootFD(root)
			if !ok {
				continue
			}
			// What the user's next --continue would run that git did not put there.
			for _, t := range p.runState.changed(gfd, root, gd) {
				move(gfd, root, t)
			}
			// A submodule's or worktree's git dir the call made in the repository's.
			for _, u := range unsafeInGitDir(gfd, gd, p.gitStart(root)) {
				move(gfd, root, u)
			}
		}
	})
	if err != nil {
		p.s.log.Warn("move aside protected paths", zap.Error(err))
	}
}

// gitStart is what the repositories below the writable dir root held when the call started,
// with what the call's sweeps moved aside there since.
func (p *Process) gitStart(root string) *gitStart {
	if p.gitStarts == nil {
		p.gitStarts = map[string]*gitStart{}
	}
	if p.gitStarts[root] == nil {
		p.gitStarts[root] = newGitStart(root, p.covers, p.guard)
	}
	return p.gitStarts[root]
}

// patternGuard finds what a call made that matches an Edit deny pattern with wildcards: the
// mounts keep each match that existed at the start read-only (had), but cannot refuse a new
// name in a writable dir.
type patternGuard struct {
	pats, roots []string
	had         []string // the protected paths at the start: nothing new lies below them
}

// names reports whether one of the patterns matches path.
func (pg *patternGuard) names(path string) bool {
	for _, pat := range pg.pats {
		if compilePattern(pat).match(path, filepath.Base(path)) {
			return true
		}
	}
	return false
}

// made walks the roots for the patterns and returns each match that lies under none of had,
// but those another call's sweep moved since the call started (movedSince): the name was free
// then. A repository's .git dir is left alone, as the plan leaves it writable. Run as the
// caller.
func (pg *patternGuard) made(uid, tenant uint32, log *zap.Logger, movedSince func(string) bool, final bool) []string {
	v := newFSView()
	// A dir of the caller's it made unreadable (chmod 000 junk) is opened up again rather than
	// left unlooked at: what it hides would stay, and refuse the next call.
	ms, err := expandPatterns(v, pg.pats, pg.roots, uid, patternWalk{openUp: true, tenant: tenant})
	if err != nil && final {
		// The call may have made the tree too big to walk within the bounds (60 000 files,
		// then the file a rule names): the last look walks it whole, once, at its user's
		// share (the call waits). Every later call is refused until the tree shrinks.
		ms, err = expandPatterns(v, pg.pats, pg.roots, uid, patternWalk{openUp: true, unbounded: true, tenant: tenant})
	}
	if err != nil {
		log.Warn("could not look for what the call made that an Edit deny rule names", zap.Error(err))
	}
	var out []string
	for _, m := range ms {
		if slices.ContainsFunc(pg.had, func(h string) bool { return under(m, h) && !movedSince(h) }) {
			continue
		}
		if fi, err := v.lstat(m); err == nil && fi.IsDir() && filepath.Base(m) == ".git" {
			continue
		}
		out = append(out, m)
	}
	return out
}

// mayExist is a guarded path's quick look, one openat2 from its root's fd that follows no
// symlink: most were not made, and for those a careful walk would cost a syscall a component.
// Not found without a symlink is the careful answer too; anything else (it exists, a symlink on
// the way, EACCES) goes on to the careful walk. A look that followed links would take a link's
// meaning to the daemon for its meaning to the user's tools, and a link can mean another place
// to each process (/proc/self/cwd/c is the daemon's cwd here, the project to cargo run there).
func mayExist(rfd int, rel string) bool {
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err == nil {
		unix.Close(fd)
	}
	return err != unix.ENOENT && err != unix.ENOTDIR
}

// isFileBeneath reports whether rel below the dir fd rfd is a regular file, reached without a
// symlink or a step out.
func isFileBeneath(rfd int, rel string) bool {
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// isLink reports whether rel below the dir fd rfd is a symlink that says link, reached without
// a symlink on the way: the same words in another dir (a dir on the way swapped for a link to
// one holding a copy) lead elsewhere.
func isLink(rfd int, rel string, link string) bool {
	dir, name := filepath.Split(rel)
	fd := rfd
	if dir = strings.TrimSuffix(dir, "/"); dir != "" {
		var err error
		if fd, err = openBeneath(rfd, dir); err != nil {
			return false
		}
		defer unix.Close(fd)
	}
	got, ok := readLink(fd, name)
	return ok && got == link
}

// readLink returns what the symlink rel below the dir fd rfd says; false when it is none.
func readLink(rfd int, rel string) (string, bool) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(rfd, rel, buf)
	if err != nil || n == len(buf) {
		return "", false
	}
	return string(buf[:n]), true
}

// namesIn returns the entry names of dir, reached from the root's fd rfd without a symlink
// or a step out: an empty set when dir does not exist, nil when it cannot be read whole (then
// each name is looked at alone).
func namesIn(rfd int, dir string) map[string]bool { return namesInMax(rfd, dir, maxListed) }

// namesInMax is namesIn with a bound of max entries.
func namesInMax(rfd int, dir string, max int) map[string]bool {
	fd, err := unix.Openat2(rfd, dir, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return map[string]bool{}
	}
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	return readNames(fd, max)
}

// maxListed bounds the entries of a dir read whole (readNames); a larger one is asked about
// path by path.
const maxListed = 1024

// readNames reads the entry names of the open dir fd; nil when it cannot, or when it holds
// more than max.
func readNames(fd int, max int) map[string]bool {
	names := map[string]bool{}
	buf := make([]byte, 4096)
	var got []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil
		}
		if n <= 0 {
			return names
		}
		_, _, got = unix.ParseDirent(buf[:n], -1, got[:0])
		for _, name := range got {
			names[name] = true
		}
		if len(names) > max {
			return nil
		}
	}
}

// asideName is what name is moved aside to: name, BlockedSuffix and the call's id, the name cut
// short when the whole would not fit in a file name with moveAside's random tail after it.
func asideName(name, call string) string {
	const nameMax, tail = 255, 11
	tag := BlockedSuffix + call
	if over := len(name) + len(tag) + tail - nameMax; over > 0 {
		name = name[:max(len(name)-over, 1)]
	}
	return name + tag
}

// moveAside renames dir/name aside (asideName with the call's id), dir reached from the root's
// fd rfd one component at a time without symlinks; fs.ErrNotExist when there is nothing to
// move. It returns what it moved, relative to rfd, and where to: dir/name, or a symlink on the
// way that the call made (its ctime since since or later). Such a link leads the user's tools, which
// follow it, to a protected path's name in a dir the walk never enters (`ln -s c .cargo` with
// c/config.toml, or the cwd's dir swapped for a link to a dir holding a new .git), so the link
// itself goes. A link that was there before the call is the user's own and stays. A dir of the
// caller's that the call took the search or write bit from to keep what it made in place gets
// it back (unlock). rfd stays open.
func moveAside(rfd int, dir, name, call string, since time.Time) (moved, aside string, err error) {
	fd := rfd
	defer func() {
		if fd != rfd {
			unix.Close(fd)
		}
	}()
	var walked []string
	for _, c := range strings.Split(dir, "/") {
		if c == "" {
			continue
		}
		next, err := openBeneath(fd, c)
		if err == unix.EACCES && unlock(fd) {
			next, err = openBeneath(fd, c)
		}
		if err == unix.ELOOP && madeLinkSince(fd, c, since) {
			aside, err := renameAside(fd, c, asideName(c, call))
			return filepath.Join(append(walked, c)...), filepath.Join(append(walked, aside)...), err
		}
		if err == unix.ELOOP {
			return "", "", errOldLink
		}
		if err == unix.ENOENT || err == unix.ENOTDIR {
			return "", "", fs.ErrNotExist // its dir is gone: nothing made there
		}
		if err != nil {
			return "", "", err
		}
		if fd != rfd {
			unix.Close(fd)
		}
		fd = next
		walked = append(walked, c)
	}
	var st unix.Stat_t
	err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.EACCES && unlock(fd) {
		err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return "", "", fs.ErrNotExist
	}
	aside, err = renameAside(fd, name, asideName(name, call))
	return filepath.Join(append(walked, name)...), filepath.Join(append(walked, aside)...), err
}

// errOldLink is moveAside's answer for a path whose way holds a symlink that was there before
// the call: the user's own (a dotfile link), or one an earlier call left. The caller looks
// where it leads.
var errOldLink = errors.New("a symlink older than the call on the way")

// madeLinkSince reports whether name in the dir fd is a symlink whose ctime (set when it was
// made, renamed or linked) is since or later.
func madeLinkSince(fd int, name string, since time.Time) bool {
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return false
	}
	return !time.Unix(st.Ctim.Unix()).Before(since)
}

// renameAside renames name in the dir fd to aside, or to aside and a random tail when that is
// taken, and returns the name it took.
func renameAside(fd int, name, aside string) (string, error) {
	err := unix.Renameat2(fd, name, fd, aside, unix.RENAME_NOREPLACE)
	if err == unix.EACCES && unlock(fd) {
		err = unix.Renameat2(fd, name, fd, aside, unix.RENAME_NOREPLACE)
	}
	if err == unix.EEXIST {
		// Made again after a sweep moved it, or the call took the name to keep this one in
		// place: a name it cannot guess.
		aside += "-" + rand.Text()[:10]
		err = unix.Renameat2(fd, name, fd, aside, unix.RENAME_NOREPLACE)
	}
	return aside, err
}

// renamedAside is renameAside to name's asideName, reporting whether it moved.
func renamedAside(fd int, name, call string) bool {
	_, err := renameAside(fd, name, asideName(name, call))
	return err == nil
}

// openBeneath opens the dir name in dir fd, refusing a symlink or a step out.
func openBeneath(fd int, name string) (int, error) {
	return unix.Openat2(fd, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
}

// openOpening opens the dir rel below rfd (O_PATH, no symlink followed on the way), giving
// each of the caller's own dirs on the way back its search bit (unlock) where it lacks it.
// It returns rfd itself for "" or "."; another fd is the caller's to close.
func openOpening(rfd int, rel string) (int, error) {
	return openWay(rfd, rel, "")
}

// openWay is openOpening that, for call != "", also makes the way again where the call
// removed it: a missing dir is made (0755), and a file or symlink in its place is moved aside
// first (asideName).
func openWay(rfd int, rel, call string) (int, error) {
	fd := rfd
	for _, c := range strings.Split(rel, "/") {
		if c == "" || c == "." {
			continue
		}
		next, err := openBeneath(fd, c)
		if err == unix.EACCES && unlock(fd) {
			next, err = openBeneath(fd, c)
		}
		if call != "" && (err == unix.ENOTDIR || err == unix.ELOOP) && renamedAside(fd, c, call) {
			err = unix.ENOENT
		}
		if call != "" && err == unix.ENOENT && unix.Mkdirat(fd, c, 0o755) == nil {
			next, err = openBeneath(fd, c)
		}
		if fd != rfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// lstatOpening is lstat of rel below rfd that opens the way as openOpening does, and its dir.
func lstatOpening(rfd int, rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dir, name := filepath.Split(rel)
	fd, err := openOpening(rfd, dir)
	if err != nil {
		return st, err
	}
	if fd != rfd {
		defer unix.Close(fd)
	}
	err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.EACCES && unlock(fd) {
		err = unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	return st, err
}

// unlock gives the dir at fd back the owner's search and write bits when it lacks one, and
// reports whether it did. Run as the caller, it changes only the caller's own dirs: a call can
// take those bits from them after making something inside (chmod 500 .), and not from anyone
// else's. Through /proc, since fchmod takes no O_PATH fd; the fd pins the inode, so nothing can
// swap the dir meanwhile.
func unlock(fd int) bool {
	return giveBack(fd, 0o300)
}

// giveBack gives the dir at fd back the owner's permission bits it lacks, and reports whether
// it did (see unlock).
func giveBack(fd int, bits uint32) bool {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&bits == bits {
		return false
	}
	return unix.Chmod("/proc/thread-self/fd/"+strconv.Itoa(fd), st.Mode&0o7777|bits) == nil
}

// keepLink makes rel below rfd the symlink to target again when a call removed or replaced
// it, moving aside what it put there; it reports whether it had to. The dirs on the way are
// reached without following a symlink. Run as the caller.
func keepLink(rfd int, rel, target, call string) bool {
	dir, name := filepath.Split(rel)
	// A dir on the way the call made unsearchable is opened up, and one it removed (or put a
	// file in place of) is made again: the link must be put back, or the next call hides
	// nothing where it led.
	fd, err := openWay(rfd, dir, call)
	if err != nil {
		return false
	}
	if fd != rfd {
		defer unix.Close(fd)
	}
	var st unix.Stat_t
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == unix.EACCES {
		unlock(fd)
	}
	if got, ok := readLink(fd, name); ok && got == target {
		return false
	}
	if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
		if !renamedAside(fd, name, call) {
			return false
		}
	}
	return unix.Symlinkat(target, fd, name) == nil
}
