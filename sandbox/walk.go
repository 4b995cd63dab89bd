package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// maxWalkDepth bounds how many dirs deep a walk goes; a tree deeper than that is refused, not
// cut short.
const maxWalkDepth = 256

// treeWalk lists a tree as the caller, to find what a path pattern matches in all of it. Each
// dir is opened relative to its parent's descriptor (O_NOFOLLOW: a symlink is an entry, never
// followed) and read with getdents, so a deep tree costs neither a path lookup from / per dir
// nor a stat per entry. What it cannot read completely is an error, never a silent gap: the
// call would otherwise reach a match the walk did not see.
type treeWalk struct {
	budget int    // entries left to visit
	uid    uint32 // the caller: a dir of theirs they cannot read is one they could open up
	// openUp: a dir of the caller's it cannot read gets the owner's read and search bits back
	// (the sweep's walk: the call took them), instead of being a gap.
	openUp bool
	buf    []byte
	// visit is told of each entry and returns whether to walk into it (a dir only).
	visit func(p, name string, isDir bool) bool
	// follow, when set, is asked of each symlink entry visit did not match: whether to walk
	// where it leads, as p (a dir once, by its inode: seen).
	follow func(p string) bool
	seen   map[[2]uint64]bool
	// beyond, when set, is told of each dir past maxWalkDepth that visit walks into, which is
	// then not listed, instead of the walk failing: the sweep after a call moves it aside whole.
	beyond func(p string)
}

var errWalkBudget = errors.New("too many entries")

// walk lists the dir at p and, recursively, the dirs visit walks into.
func (w *treeWalk) walk(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.EACCES && w.openUp && w.giveBackAt(unix.AT_FDCWD, p) {
		fd, err = unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return w.openFailed(unix.AT_FDCWD, p, p, err, false)
	}
	defer unix.Close(fd)
	if w.buf == nil {
		w.buf = make([]byte, 32<<10)
	}
	return w.dir(fd, p, 0)
}

func (w *treeWalk) dir(fd int, p string, depth int) error {
	if depth >= maxWalkDepth {
		if w.beyond != nil {
			w.beyond(p)
			return nil
		}
		return fmt.Errorf("%s is more than %d dirs deep", p, maxWalkDepth)
	}
	var into, links []string
	for {
		n, err := unix.Getdents(fd, w.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", p, err)
		}
		if n <= 0 {
			break
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name NUL-terminated.
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(w.buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				return fmt.Errorf("read %s: a malformed directory entry", p)
			}
			typ, name := w.buf[off+18], w.buf[off+19:off+reclen]
			off += reclen
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if string(name) == "." || string(name) == ".." {
				continue
			}
			if w.budget--; w.budget < 0 {
				return errWalkBudget
			}
			isDir := typ == unix.DT_DIR
			if typ == unix.DT_UNKNOWN { // a file system that does not say: ask
				var st unix.Stat_t
				isDir = unix.Fstatat(fd, string(name), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			}
			nm := string(name)
			if w.visit(p+"/"+nm, nm, isDir) && isDir {
				into = append(into, nm)
			} else if typ == unix.DT_LNK && w.follow != nil && w.follow(p+"/"+nm) {
				links = append(links, nm)
			}
		}
	}
	for _, name := range into {
		sub := p + "/" + name
		cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EACCES && w.openUp && w.giveBackAt(fd, name) {
			cfd, err = unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			if err := w.openFailed(fd, name, sub, err, true); err != nil {
				return err
			}
			continue
		}
		err = w.dir(cfd, sub, depth+1)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	for _, name := range links {
		if err := w.throughLink(fd, name, p+"/"+name, depth); err != nil {
			return err
		}
	}
	return nil
}

// throughLink walks the dir the symlink name (below fd) leads to, as p, unless it was walked
// already or is no dir. What it cannot open is a gap like any dir's (openFailed).
func (w *treeWalk) throughLink(fd int, name, p string, depth int) error {
	cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOTDIR || err == unix.ENOENT || err == unix.ELOOP:
		return nil // leads to a file, or nowhere
	case err == unix.EACCES || err == unix.EPERM:
		// As openFailed, judged by where it leads: someone else's dir the caller cannot
		// search is closed to the call too.
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, 0) == nil && st.Uid != w.uid && unix.Faccessat(fd, name, unix.X_OK, unix.AT_EACCESS) != nil {
			return nil
		}
		return fmt.Errorf("cannot search %s: %w", p, err)
	case err != nil:
		return fmt.Errorf("cannot search %s: %w", p, err)
	}
	defer unix.Close(cfd)
	var st unix.Stat_t
	if err := unix.Fstat(cfd, &st); err != nil {
		return fmt.Errorf("cannot search %s: %w", p, err)
	}
	if w.seen == nil {
		w.seen = map[[2]uint64]bool{}
	}
	key := [2]uint64{st.Dev, st.Ino}
	if w.seen[key] {
		return nil
	}
	w.seen[key] = true
	return w.dir(cfd, p, depth+1)
}

// giveBackAt gives the caller's dir name below dirfd back the owner's read and search bits.
// Run as the caller: anyone else's dir stays as it is.
func (w *treeWalk) giveBackAt(dirfd int, name string) bool {
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return giveBack(fd, 0o500)
}

// openFailed says whether a dir that could not be opened leaves a gap. Gone, or no longer a
// dir, it holds nothing. Unreadable, it is a gap when the caller owns it (the call, as the
// same user, could chmod it and look inside), or when it lies inside the tree and the caller
// may still search it (mode 711: the call opens what it holds by name); anyone else's that
// the caller cannot search stays closed to the call, and so does a walk's start the daemon
// made searchable only (the session's results dir, whose file names are the daemon's). Run as
// the caller, so the search check is the caller's.
func (w *treeWalk) openFailed(dirfd int, name, p string, err error, inside bool) error {
	switch err {
	case unix.ENOENT, unix.ENOTDIR, unix.ELOOP:
		return nil
	case unix.EACCES, unix.EPERM:
		var st unix.Stat_t
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Uid != w.uid &&
			(!inside || unix.Faccessat(dirfd, name, unix.X_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW) != nil) {
			return nil
		}
	}
	return fmt.Errorf("cannot search %s: %w", p, err)
}
