package worker

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/internal/proclink"
)

// Special kinds of Resolved.Special.
const (
	SpecialDevice = "device"
	SpecialFIFO   = "fifo"
	SpecialSocket = "socket"
	SpecialProc   = "proc"
	// SpecialHidden is a path the sandbox hides (deny_paths, a Read deny rule): the worker
	// sees the null device bound over a file there.
	SpecialHidden = "hidden"
)

// maxPathBytes is the kernel's PATH_MAX: the longest path a call may name whole.
const maxPathBytes = 4096

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// isNullDevice reports whether fi is the null device (1:3), which the sandbox binds over a
// hidden file.
func isNullDevice(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && fi.Mode()&fs.ModeCharDevice != 0 && unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3
}

func specialOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return SpecialDevice
	case m&fs.ModeNamedPipe != 0:
		return SpecialFIFO
	case m&fs.ModeSocket != 0:
		return SpecialSocket
	}
	return ""
}

// WARNING: the policy decides on what this returns (a deny rule on the link or its target,
// device paths, the name variant Read will open), and Read opens only what it returned; rerun
// TestResolve, TestReadOpensOnlyTheDecidedFile and the executor's TestReadDecidesOnWhatItOpens
// as root after changing.
//
// The path is cleaned lexically first, as the tools clean it before opening, so `..` means
// the same here and in the open. With fallback, a name that does not exist is replaced by an
// existing Unicode or spacing variant of it (Variant), so the decision names what Read opens.
// Symlinks are then followed as the owner sees them.
func doResolve(p string, fallback bool) (*Resolved, error) {
	if !filepath.IsAbs(p) {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("path %q is not absolute; pass an absolute path", p))
	}
	clean := filepath.Clean(p)
	if len(clean) > maxPathBytes {
		// No call opens it whole (ENAMETOOLONG): it leads nowhere, and is decided by its
		// name. Following it component by component cost by the square of its length
		// (60 000 of them: 16 s of the worker's CPU).
		return &Resolved{Resolved: clean}, nil
	}
	// /proc paths (including /proc/self/fd/N of pipes) are never read, whatever they point to.
	if under(clean, "/proc") {
		return &Resolved{Resolved: clean, Special: SpecialProc, Exists: true}, nil
	}
	variant := ""
	if fallback {
		// Lstat, not Stat: a dangling symlink is the name asked for, not a missing one.
		if _, err := os.Lstat(clean); err != nil && isNotExist(err) {
			if alt := unicodeVariant(clean); alt != "" {
				clean, variant = alt, alt
			}
		}
	}
	out, err := resolveClean(clean)
	if out != nil {
		out.Variant = variant
	}
	return out, err
}

func resolveClean(clean string) (*Resolved, error) {
	r, err := filepath.EvalSymlinks(clean)
	if err != nil || r != clean {
		// A link into /proc/self or /dev/fd (src/x -> /proc/self/cwd/y/secret) leads where
		// the opening process is, not where the worker is: decided by that name.
		if p := proclink.Target(clean); p != "" {
			return &Resolved{Resolved: p, Special: SpecialProc, Exists: true}, nil
		}
	}
	if err == nil {
		out := &Resolved{Resolved: r, Exists: true}
		if under(r, "/proc") {
			out.Special = SpecialProc
			return out, nil
		}
		if fi, err := os.Stat(r); err == nil {
			out.Special = specialOf(fi.Mode())
			if out.Special == SpecialDevice && r != os.DevNull && isNullDevice(fi) {
				out.Special = SpecialHidden
			}
			out.IsDir = fi.IsDir()
			out.Dev, out.Ino = devIno(fi)
		}
		return out, nil
	}
	// EvalSymlinks fails on kernel magic links (/dev/stdin -> /proc/self/fd/0 -> pipe:[N]);
	// the kernel's own stat still knows what they are.
	if fi, err := os.Stat(clean); err == nil {
		special := specialOf(fi.Mode())
		if special == "" && under(clean, "/dev") {
			special = SpecialDevice
		}
		dev, ino := devIno(fi)
		return &Resolved{Resolved: clean, Special: special, Exists: true, IsDir: fi.IsDir(), Dev: dev, Ino: ino}, nil
	}
	if l, err := os.Lstat(clean); err == nil && l.Mode()&fs.ModeSymlink != 0 && under(clean, "/dev") {
		return &Resolved{Resolved: clean, Special: SpecialDevice, Exists: true}, nil
	}
	r = resolveMissing(clean, 0)
	out := &Resolved{Resolved: r}
	if under(r, "/proc") {
		out.Special = SpecialProc
	}
	return out, nil
}

// devIno is the device and inode number of fi, or zeros where the platform has none.
func devIno(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino
	}
	return 0, 0
}

// resolveMissing resolves a path that does not exist: a dangling symlink is followed to
// where a write would land, otherwise the deepest existing parent is resolved and the rest
// appended.
func resolveMissing(p string, depth int) string {
	if depth > 40 {
		return p
	}
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := os.Readlink(p); err == nil {
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(p), t)
			}
			return resolveMissing(filepath.Clean(t), depth+1)
		}
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	rp, err := filepath.EvalSymlinks(parent)
	if err != nil {
		rp = resolveMissing(parent, depth+1)
	}
	return filepath.Join(rp, filepath.Base(p))
}

// doReadFile reads a small regular file whole (settings files for the policy).
func doReadFile(ctx context.Context, path string, maxBytes int64) (*FileInfo, []byte, error) {
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	f, fi, err := openRegular(path, nil)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if fi.Size() > maxBytes {
		return nil, nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s is %d bytes, more than the %d allowed", path, fi.Size(), maxBytes))
	}
	b, err := readAllLimit(ctx, f, maxBytes)
	if err != nil {
		return nil, nil, err
	}
	info := fileInfo(path, fi)
	info.SHA256 = sha256hex(b)
	return &info, b, nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
