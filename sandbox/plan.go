package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"golang.org/x/text/unicode/norm"
)

// plan decides everything the child does; netns is the session's network namespace to join,
// nil to keep the host's.
//
// WARNING: the whole confinement is decided here; rerun as root after changing:
// go test -run 'TestEscape|TestInit' ./sandbox/
func (s *Sandbox) plan(p *Process) (cs *childSpec, netns *os.File, err error) {
	spec := &p.spec
	var l *look
	// Everything the plan learns about paths (the session's directories, their git dirs, the
	// deny paths) it learns as the caller: the root daemon never resolves or opens a path a
	// user named with root's rights.
	hidden := hiddenFor(s.seams.defaultDeny, spec.UID)
	tab, err := s.mounts.get()
	if err != nil {
		return nil, nil, fmt.Errorf("read the mount table, to hide each path wherever it shows: %w", err)
	}
	al := &aliasLookup{tab: tab}
	busy := s.guarding.snapshot(spec.UID) // before any lstat: see guardSet
	reserve := func(n int) error {
		if err := s.pins.take(spec.tenant(), n); err != nil {
			return err
		}
		p.pins = n // given back by unpinCovers
		return nil
	}
	cerr := asCaller(spec.UID, spec.GID, spec.Groups, func() {
		l, err = lookAround(spec, hidden, al, busy, s.linkScans, &s.gitlinks, reserve)
	})
	if l != nil {
		p.covers, p.hidden = l.covers, l.hidden // the Process holds their fds from here (unpinCovers)
	}
	if err != nil || cerr != nil {
		return nil, nil, errors.Join(err, cerr)
	}
	p.guard, p.repos, p.repoLinks, p.runState, p.writable = l.guard, l.repos, l.repoLinks, l.runState, l.writable
	if spec.MoveAsideCreated && !spec.ReadOnlyWorkspace && len(spec.GuardPatterns) > 0 {
		// A user's link kept leading where it did (guarded.target) is the user's, not a new
		// match the call made: the sweep puts it back, and must not then move it aside.
		had := slices.Clone(l.protected)
		for _, g := range l.guard {
			if g.target != "" {
				had = append(had, filepath.Join(g.root, g.rel))
			}
		}
		p.guardWalk = &patternGuard{pats: spec.GuardPatterns, roots: l.writable, had: had}
	}
	s.guarding.start(p) // until Wait, or Start's failure
	// The landlock expansion lists the ancestors of deny paths as the daemon: names only,
	// which become kernel rules that never grant past the caller's own permissions. As the
	// caller, a home under a 711 /home could not be listed, and would be unreadable in the
	// child.
	ll, err := landlockRules(s.expansions, s.landlockABI, spec, l.writable, l.readOnly, l.fileDeny, l.later, l.coveredLater)
	if err != nil {
		return nil, nil, err
	}
	p.rulesAt = time.Now() // what is born later matches no rule of the expansions (hiddenLost)
	// The next pooled inits prebuild this base: the next call is most likely this session's.
	if ll != nil && ll.baseKey != nil && !s.llHint.Load().matches(ll) {
		s.llHint.Store(ll.hint())
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	cs = &childSpec{
		path: spec.Path, dir: l.dir,
		argv: append([]string{spec.Path}, spec.Args...), env: env, direct: spec.Direct,
		uid: spec.UID, gid: spec.GID, rgid: realGID(spec), umask: spec.Umask, groups: spec.Groups,
		netnsFD: -1, nExtra: len(spec.ExtraFiles),
		mounts: l.mounts, tmpSize: p.lim.TmpSizeBytes,
		rlimits: []rlimit{
			{unix.RLIMIT_CORE, 0}, // core dumps could land secrets on disk
			{unix.RLIMIT_FSIZE, uint64(p.lim.FileSizeMaxBytes)},
			{unix.RLIMIT_NOFILE, uint64(p.lim.OpenFilesMax)},
		},
		landlock: ll, aliases: al,
		early: s.bpfEarly,
		late:  [][]byte{s.bpfLate},
	}
	if spec.AllowUnixSockets {
		cs.late = [][]byte{s.bpfLateUnix}
	}
	// The next pooled inits are made in this user's cgroup: the next call is most likely theirs.
	if s.userHint.Load() != spec.UID {
		s.userHint.Store(spec.UID)
	}
	if !spec.AllowNetwork {
		if netns, err = s.sessionNetns(spec.Session); err != nil {
			return nil, nil, err
		}
		cs.netnsFD = fdNetns
		// The next pooled inits wait in this session's network namespace.
		if last := s.netnsHint.Load(); last == nil || *last != spec.Session {
			s.netnsHint.Store(&spec.Session)
		}
	}
	return cs, netns, nil
}

// look is what a plan learned about the filesystem, as the caller.
type look struct {
	dir                string    // the call's directory, resolved (callDir)
	writable, readOnly []string  // resolved, outermost only
	protected          []string  // read-only inside writable dirs (protectedPaths)
	guard              []guarded // protected paths missing now (Spec.MoveAsideCreated)
	covers             []covered // protected paths that exist now (Spec.MoveAsideCreated)
	hidden             []hiddenPath
	repos              []guarded           // where a repository's submodules are looked at (gitlinkGits)
	repoLinks          []map[string]fileID // each one's gitlinks and their .git now, nil where unknown
	runState           runState            // their rebase state now
	fileDeny           []string            // deny paths landlock keeps unreadable
	later              []string            // deny paths that may appear while the call runs (appearLater)
	coveredLater       []string            // the ones of later that exist, covered by the mounts
	mounts             []mountOp
}

// coversOf is what each protected path that exists is now (covered), found from its
// writable dir as the sweep will find it. Each is held open (O_PATH) until the call ends:
// were the file replaced and freed, a new file could get its inode number (ext4 hands a freed
// one out again at once) and pass for the file the mount still covered.
func coversOf(v *fsView, protected, writable []string) []covered {
	var out []covered
	for _, q := range protected {
		g, ok := guardable(v, q, writable)
		if !ok {
			continue
		}
		if pin, ok := pinPath(q, unix.O_NOFOLLOW); ok {
			out = append(out, covered{root: g.root, rel: g.rel, pinned: pin})
		}
	}
	return out
}

// lookAround resolves the spec's paths and plans the call's mounts; hidden are the sockets and
// socket dirs every call hides (hiddenFor), al the mount table the child starts with. Run as
// the caller. busy are the paths other running calls guard (guardSet).
func lookAround(spec *Spec, hidden []string, al *aliasLookup, busy guardLists, scans *linkScans, gitlinks *gitlinkCache, reserve func(pins int) error) (*look, error) {
	v := newFSView()
	// Only the dirs the spec names are writable: a worktree's ".git" file names its git dir,
	// but that file is the agent's to write, so following it would let the agent pick what
	// becomes writable. A worktree's main repository is added as a session dir instead.
	writable, err := cleanDirs(v, spec.WritableDirs)
	if err != nil {
		return nil, err
	}
	if err := dirsMoved(v, spec.DirsLeadTo); err != nil {
		return nil, err
	}
	l := &look{writable: outermost(writable)}
	if l.dir, err = callDir(v, spec); err != nil {
		return nil, err
	}
	readOnly, err := cleanDirs(v, spec.ReadOnlyDirs)
	if err != nil {
		return nil, err
	}
	l.readOnly = outermost(readOnly)
	deny, err := cleanDirs(v, spec.DenyPaths)
	if err != nil {
		return nil, err
	}
	deny = equivalentNames(deny)
	for _, d := range deny {
		if dir := v.ownDirInTheWay(d, spec.UID); dir != "" {
			return nil, fmt.Errorf("%w: cannot tell whether %s exists, to hide it: %s, yours, cannot be searched, so a call could chmod it and look; make it searchable (chmod u+x)", ErrBadSpec, d, dir)
		}
	}
	// Paths the policy denies reading by a pattern: the ones that exist in the session's dirs
	// now are hidden like deny paths, and so is a whole dir (or file) outside them that a
	// pattern denies everything under (Read(//etc/**), Read(~/out.txt/**)).
	roots := append(slices.Clone(l.writable), l.readOnly...)
	matches, err := expandPatterns(v, spec.HidePatterns, roots, spec.UID, patternWalk{followOut: true, tenant: spec.tenant()})
	matches = throughLinks(v, matches)
	if err != nil {
		return nil, err
	}
	for _, p := range append(matches, wholePaths(v, spec.HidePatterns, roots)...) {
		if !slices.Contains(deny, p) {
			deny = append(deny, p)
		}
	}
	// A mount over a path covers that place only, and landlock's rules hold on the dirs around
	// it as reached from there: each other place the host shows a deny path at (a bind mount of
	// a parent, the file system mounted twice) is a deny path too.
	deny = al.withAliases(deny)
	if !spec.ReadOnlyWorkspace {
		if l.protected, l.guard, err = protectedPaths(v, spec, l.writable, al, busy, scans); err != nil {
			return nil, err
		}
		if spec.MoveAsideCreated {
			l.repos = repoRoots(l.writable, resolve(v, spec.Dir))
			if wait := walkShare.wait(spec.tenant()); wait > 0 {
				return nil, errWalkShare(wait)
			}
			l.repoLinks = gitlinksOf(spec.tenant(), l.repos, gitlinks)
			l.runState = runStateOf(l.repos, l.writable)
			links := linksToHidden(v, spec, l.writable, l.guard)
			// Kept leading where it did, a link is also held in place: no second entry moves
			// the restored one aside.
			l.guard = slices.DeleteFunc(l.guard, func(g guarded) bool {
				return g.link != "" && slices.ContainsFunc(links, func(k guarded) bool { return k.root == g.root && k.rel == g.rel })
			})
			l.guard = append(l.guard, links...)
		}
	}
	// The sockets (and the dirs that hold them) hidden by default stay mount-hidden only, also
	// when the config names them: landlock does not govern connect(2), so rules around one that
	// appears later would cost (a dozen around /run for a root caller) and protect nothing.
	// Resolved like the rest (/var/run is a symlink): the child mounts over none.
	sockets, err := cleanDirs(v, hidden)
	if err != nil {
		return nil, err
	}
	sockets = hideAround(sockets, roots)
	sockets = al.withAliases(sockets)
	mountDeny := append(slices.Clone(deny), slices.DeleteFunc(slices.Clone(sockets), func(d string) bool { return slices.Contains(deny, d) })...)
	if l.mounts, err = callMounts(v, spec, l.writable, l.readOnly, mountDeny, l.protected, al.origin); err != nil {
		return nil, err
	}
	l.fileDeny = slices.DeleteFunc(slices.Clone(deny), func(d string) bool { return slices.Contains(sockets, d) })
	l.later, l.coveredLater = appearLater(v, l.fileDeny, l.writable, spec.UID)
	// Last: nothing after them fails, so what they hold open is the Process's to close.
	pins := len(mountDeny)
	if spec.MoveAsideCreated && !spec.ReadOnlyWorkspace {
		pins += len(l.protected)
	}
	if err := reserve(pins); err != nil {
		return nil, err
	}
	if spec.MoveAsideCreated && !spec.ReadOnlyWorkspace {
		l.covers = coversOf(v, l.protected, l.writable)
	}
	l.hidden = hiddenOf(mountDeny)
	// A deny path missing now, outside the writable dirs, that appears while the call runs was
	// put there on the host: landlock holds a new file in a dir of the caller's (expanded), but
	// not one moved in from beside it (it keeps the rule it had as an entry of the expanded
	// dir), nor one in a dir shared with others (a sticky /var/tmp). The sweep kills the call
	// for those (hiddenLost).
	watched := l.fileDeny
	if spec.WatchHidden {
		watched = mountDeny
	}
	for _, d := range watched {
		// Landlock grants a writable dir whole: nothing expands around a path in one.
		inWritable := slices.ContainsFunc(l.writable, func(w string) bool { return under(d, w) })
		if _, err := v.lstat(d); (errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) && (spec.WatchHidden || !inWritable) {
			l.hidden = append(l.hidden, hiddenPath{path: d, pinned: pinned{fd: -1}, expanded: !inWritable && slices.Contains(l.later, d)})
		}
	}
	return l, nil
}

// hiddenOf is what each path the mounts hide (callMounts' deny) is now, held open until the
// call ends: a mount covers the file or dir it was made on, and a rename over the path or its
// removal and re-creation on the host (a credentials file the user's tool saves again, a
// socket a restarted service makes again, /run/user/<uid> at the next login) shows the new one
// uncovered, which landlock does not hold inside a writable dir nor anywhere it was when the
// call started. The sweep kills the call once one is no longer the file covered. Run as the
// caller; followed, as the mount is.
func hiddenOf(paths []string) []hiddenPath {
	var out []hiddenPath
	for _, d := range paths {
		if pin, ok := pinPath(d, 0); ok {
			out = append(out, hiddenPath{path: d, pinned: pin})
		}
	}
	return out
}

// pinned is a file held open (O_PATH) and its identity: while fd is open no other file can
// take its inode number.
type pinned struct {
	dev, ino uint64
	fd       int
}

// pinPath opens p (O_PATH, with flags: O_NOFOLLOW or 0) and returns it pinned.
func pinPath(p string, flags int) (pinned, bool) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return pinned{}, false
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		unix.Close(fd)
		return pinned{}, false
	}
	return pinned{dev: st.Dev, ino: st.Ino, fd: fd}, true
}

// hideAround returns hidden with every dir that holds one of keep (a session dir: an agent's
// socket dir the policy exposes by path, such as /run/user/<uid>/gnupg) replaced by its
// entries but the ones on the way to keep, recursively: a cover over the dir would hide what
// the session asked for, and only that is shown. A hidden path in a session dir, or equal to
// one, stays hidden, as deny paths do. The entries are listed as the caller, like the rest of
// the plan.
func hideAround(hidden, keep []string) []string {
	var out []string
	for _, h := range hidden {
		out = append(out, hideAroundOne(h, keep)...)
	}
	return out
}

func hideAroundOne(h string, keep []string) []string {
	holds := slices.ContainsFunc(keep, func(k string) bool { return k != h && under(k, h) })
	if !holds {
		return []string{h}
	}
	entries, err := os.ReadDir(h)
	if err != nil {
		return []string{h} // cannot be listed: hidden whole, the session dir with it
	}
	var out []string
	for _, e := range entries {
		// A symlink needs no cover: what it leads to is covered where it lies, or lies
		// outside and is not the runtime dir's to hide (and the child mounts over no symlink).
		if p := filepath.Join(h, e.Name()); !slices.Contains(keep, p) && e.Type()&os.ModeSymlink == 0 {
			out = append(out, hideAroundOne(p, keep)...)
		}
	}
	return out
}

// cleanDirs makes every path absolute-clean and symlink-resolved, dropping duplicates.
func cleanDirs(v *fsView, in []string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, p := range in {
		c, err := cleanAbs(p)
		if err != nil {
			return nil, err
		}
		c = resolve(v, c)
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out, nil
}

// equivalentNames are paths and, beside each whose name is not ASCII, every entry of its dir
// that spells the same name in another Unicode form (é as one letter, or e and a combining
// accent, in any order): a rule's name is matched in one normal form, but the kernel compares
// bytes, and a file's name may be in any form. Read as the caller; a dir that cannot be read
// adds nothing, and neither does a name made after the plan (a mount covers what exists).
func equivalentNames(paths []string) []string {
	out := paths
	for _, p := range paths {
		dir, base := filepath.Split(p)
		if strings.IndexFunc(base, func(r rune) bool { return r >= utf8.RuneSelf }) < 0 {
			continue
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			continue
		}
		names := readNames(fd, maxListed)
		unix.Close(fd)
		want := norm.NFC.String(base)
		for n := range names {
			if q := dir + n; n != base && norm.NFC.String(n) == want && !slices.Contains(out, q) {
				out = append(slices.Clip(out), q)
			}
		}
	}
	return out
}

// ResolveDirs resolves each of dirs as the caller, as a plan does: the record of where a
// session's dirs lead when they are given (Spec.DirsLeadTo).
func ResolveDirs(uid, gid uint32, groups []uint32, dirs []string) ([]string, error) {
	out := make([]string, len(dirs))
	err := asCaller(uid, gid, groups, func() {
		v := newFSView()
		for i, d := range dirs {
			out[i] = resolve(v, filepath.Clean(d))
		}
	})
	return out, err
}

// Unsearchable returns the first of dirs the caller cannot enter (no search permission on it
// or on the way), or "": a session dir the owner cannot enter is no dir of the owner's, and
// would be mounted for nothing.
func Unsearchable(uid, gid uint32, groups []uint32, dirs []string) (string, error) {
	bad := ""
	err := asCaller(uid, gid, groups, func() {
		for _, d := range dirs {
			var st unix.Stat_t
			// A lookup of "." in d needs search permission on d itself.
			if err := unix.Stat(strings.TrimSuffix(d, "/")+"/.", &st); err != nil {
				bad = d
				return
			}
		}
	})
	return bad, err
}

// DirsMoved returns an ErrDirMoved for the first of leadsTo's dirs that no longer resolves,
// as the caller, where it did (Spec.DirsLeadTo), and nil when each still does.
func DirsMoved(uid, gid uint32, groups []uint32, leadsTo map[string]string) error {
	if len(leadsTo) == 0 {
		return nil
	}
	var moved error
	if err := asCaller(uid, gid, groups, func() { moved = dirsMoved(newFSView(), leadsTo) }); err != nil {
		return err
	}
	return moved
}

func dirsMoved(v *fsView, leadsTo map[string]string) error {
	for d, want := range leadsTo {
		if got := resolve(v, filepath.Clean(d)); got != want {
			return fmt.Errorf("%w: the session's dir %s leads to %s now, not to %s as when it was given", ErrDirMoved, d, got, want)
		}
	}
	return nil
}

// CwdMoved is callDir's check of a session's cwd, as the caller (uid, gid, groups) looks it up
// now, for a call about to be decided: a cwd that no longer resolves inside the session dir
// it lies in (a dir on its way replaced by a link) would have its call decided against names
// that lead elsewhere. The error wraps ErrDirMoved.
func CwdMoved(uid, gid uint32, groups []uint32, cwd string, dirs []string) error {
	var moved error
	if err := asCaller(uid, gid, groups, func() {
		_, moved = callDir(newFSView(), &Spec{Dir: cwd, WritableDirs: dirs})
	}); err != nil {
		return err
	}
	return moved
}

// callDir is the call's directory as it resolves now, which the child enters and then
// checks it is in (a link made on the way since fails the call: it would run elsewhere than
// here). Where Spec.Dir lies in a dir of the spec, it must resolve inside that dir's own
// resolution: a session's cwd is a name, checked when it was set, and a dir on its way
// replaced by a link since (`rmdir sub && ln -s ~other sub`, by a task or on the host) would
// start the call outside the session while its decision took the command as run inside.
func callDir(v *fsView, spec *Spec) (string, error) {
	if spec.Dir == "" {
		return "", nil
	}
	dir, err := cleanAbs(spec.Dir)
	if err != nil {
		return "", err
	}
	to := resolve(v, dir)
	if to == dir {
		return to, nil // no link on its way, nor on the way to a dir it lies in
	}
	// By name or by where the dir leads: a session given as ~/link (to ~/real) keeps its
	// cwd resolved, ~/real/sub, which lies in the dir only by the dir's resolution.
	for _, list := range [][]string{spec.WritableDirs, spec.ReadOnlyDirs} {
		for _, d := range list {
			d = filepath.Clean(d)
			rd := resolve(v, d)
			if (under(dir, d) || under(dir, rd)) && !under(to, rd) {
				return "", fmt.Errorf("%w: %s leads to %s now, outside %s", ErrDirMoved, dir, to, d)
			}
		}
	}
	return to, nil
}

// outermost drops every dir that lies inside another one of the list: the outer dir's mount
// already carries it, and one mount per tree keeps the plan short.
func outermost(dirs []string) []string {
	var out []string
	for i, d := range dirs {
		inside := false
		for j, o := range dirs {
			if i != j && under(d, o) && d != o {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, d)
		}
	}
	return out
}

// cleanAbs returns the cleaned absolute path, or an error for a relative one.
func cleanAbs(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: path %q is not absolute", ErrBadSpec, p)
	}
	return filepath.Clean(p), nil
}

func under(p, dir string) bool {
	// Compared in place: dir+"/" would allocate, and the plan asks this of every pair of
	// candidate and writable dir.
	return p == dir || dir == "/" || len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

// linksToHidden are the user's symlinks in writable dirs on the way to a deny path, a hide
// pattern's literal part, a protected path or an Edit deny's, as guarded links with their
// targets (guarded.target): the mounts hide, or hold read-only, where each leads now, and the
// sweep keeps it leading there (a link removed would leave the place it led to open to the
// next call: ~/dotfiles/bashrc once ~/.bashrc is gone, until the user makes the link again).
// Run as the caller.
func linksToHidden(v *fsView, spec *Spec, writable []string, have []guarded) []guarded {
	named := slices.Concat(spec.DenyPaths, spec.ProtectedPaths, v.matchedLinks)
	for _, pat := range slices.Concat(spec.HidePatterns, spec.ProtectedPatterns) {
		if lit, _ := literalPrefix(pat); lit != "" {
			named = append(named, lit)
		}
	}
	var out []guarded
	for _, n := range named {
		c, err := cleanAbs(n)
		if err != nil {
			continue
		}
		// Each link on the way, not only the first: one may lead to a dir holding another, or
		// to another link.
		for _, g := range linksOnTheWay(v, c, writable) {
			g.link, g.target = "", g.link
			if !slices.Contains(out, g) && !slices.Contains(have, g) {
				out = append(out, g)
			}
		}
	}
	return out
}
