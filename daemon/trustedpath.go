package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// maxLinks bounds the symlinks checkTrustedDir follows, as the kernel's ELOOP does.
const maxLinks = 40

// WARNING: the daemon creates, chmods and removes entries under these directories as root
// (the state directory's tool-results at every start, the stale socket); a directory another
// user can change turns that into a confused deputy. Rerun TestUntrustedStateDirRefused and
// TestUntrustedSocketDirRefused as root after changing.
//
// checkTrustedDir checks that nobody but root (or the daemon's own uid) can change what dir
// names: every directory from / down to it, and every symlink on the way (a symlink's owner
// can replace it in a sticky directory), is owned by root or by us, and no directory on the
// way is writable by group or others unless it is sticky (/tmp, /var/tmp: there only an
// entry's owner may rename or remove it). The last directory itself must not be writable by
// others at all unless shared says it may be a sticky one (the socket's /tmp). A missing tail
// is fine when missing says so: the daemon makes it, under a directory only root can change.
func checkTrustedDir(dir string, shared, missing bool) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s must be an absolute path", dir)
	}
	euid := os.Geteuid()
	ours := func(fi fs.FileInfo) (uint32, bool) {
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return 0, false
		}
		return st.Uid, st.Uid == 0 || int(st.Uid) == euid
	}
	pending := parts(filepath.Clean(dir))
	cur, links := "/", 0
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		if name == ".." {
			// An ancestor of a directory already checked: checked on the way down.
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) && missing {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check %s: %w", dir, err)
		}
		if uid, ok := ours(fi); !ok {
			return fmt.Errorf("%s: %s is owned by uid %d, who could replace what the daemon keeps there; use a path only root can change", dir, next, uid)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if links++; links > maxLinks {
				return fmt.Errorf("check %s: too many levels of symbolic links", dir)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("check %s: %w", dir, err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
			}
			pending = append(parts(target), pending...)
			continue
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s: %s is not a directory", dir, next)
		}
		last := len(pending) == 0
		sticky := fi.Mode()&fs.ModeSticky != 0
		if fi.Mode().Perm()&0o022 != 0 && (!sticky || last && !shared) {
			return fmt.Errorf("%s: %s is writable by users other than root (mode %v); make it writable by root alone", dir, next, fi.Mode().Perm())
		}
		cur = next
	}
	return nil
}

// parts splits a path into its names, without the empty and "." ones.
func parts(p string) []string {
	var out []string
	for _, n := range strings.Split(p, "/") {
		if n != "" && n != "." {
			out = append(out, n)
		}
	}
	return out
}
