package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// MaxEditFileBytes bounds the files Edit loads whole.
const MaxEditFileBytes = 64 << 20

// umask is the worker's umask, read once at start (it is process-wide, so it is not flipped
// per write), applied to the mode of new files.
var umask = func() fs.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return fs.FileMode(m)
}()

// checkExpect refuses a file that is not what the session last read: by content hash when the
// read recorded one, else by size and mtime.
func checkExpect(path string, cur []byte, fi fs.FileInfo, e *Expect) error {
	if e.SHA256 != "" && cur != nil {
		if sha256hex(cur) == e.SHA256 {
			return nil
		}
	} else if fi.Size() == e.Size && fi.ModTime().UnixNano() == e.MTimeNano {
		return nil
	}
	return errcode.Msg(errcode.Stale, fmt.Sprintf("%s has changed on disk since this session read it (by the user, a formatter or another process); Read it again, then retry the change", path))
}

func notReadError(path string) error {
	return errcode.Msg(errcode.Stale, fmt.Sprintf("%s already exists and this session has not read it; Read it first, then write", path))
}

// writeTarget is where a write of path lands: path resolved now, as the policy's facts resolve
// it (resolveClean), which must be where the policy decided it leads when the caller says so.
// The write then goes to that name in that directory without following any symlink
// (writeAtomic), so a link swapped in meanwhile cannot send it to another file.
func writeTarget(path, decided string) (string, error) {
	r, err := resolveClean(path)
	if err != nil {
		return "", err
	}
	if decided != "" && r.Resolved != decided {
		return "", errcode.Msg(errcode.Conflict, fmt.Sprintf("refused to write %s: it leads to %s now, not to %s where the permission decision was made (a symlink or a directory changed); write it again to have the new place decided", path, r.Resolved, decided))
	}
	return r.Resolved, nil
}

// WARNING: writes as the owner where the policy decided (writeTarget). Rerun
// TestWriteAtomicKeepsModeAndOwner, TestWriteGoesWhereDecided, TestWriteTool and TestEditTool
// as root after changing.
func doWrite(ctx context.Context, a *WriteArgs, content []byte) (*WriteReply, error) {
	path, err := cleanAbs(a.Path)
	if err != nil {
		return nil, err
	}
	if l, lerr := os.Lstat(path); lerr == nil && l.Mode()&fs.ModeSymlink != 0 {
		if _, serr := os.Stat(path); isNotExist(serr) {
			return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("%s is a symlink to a missing file; write to the target path instead", path))
		}
	}
	target, err := writeTarget(path, a.Decided)
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(target)
	var cur []byte
	switch {
	case err == nil:
		if fi.IsDir() {
			return nil, errcode.Msg(errcode.ErrnoEISDIR, fmt.Sprintf("%s is a directory; give a file path", path))
		}
		if !fi.Mode().IsRegular() {
			return nil, errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("%s is not a regular file; refusing to write to it", path))
		}
		if a.Expect == nil {
			return nil, notReadError(path)
		}
		if a.Expect.SHA256 != "" && fi.Size() <= MaxEditFileBytes {
			f, _, err := openRegular(target, nil)
			if err != nil {
				return nil, err
			}
			cur, err = readAllLimit(ctx, f, MaxEditFileBytes)
			f.Close()
			if err != nil {
				return nil, err
			}
		}
		if err := checkExpect(path, cur, fi, a.Expect); err != nil {
			return nil, err
		}
	case isNotExist(err):
		fi = nil
	default:
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("stat %s: %w; check the path and its permissions", path, unwrapPath(err)))
	}
	return writeAtomic(path, target, content, fi)
}

func doEdit(ctx context.Context, a *EditArgs) (*WriteReply, error) {
	path, err := cleanAbs(a.Path)
	if err != nil {
		return nil, err
	}
	target, err := writeTarget(path, a.Decided)
	if err != nil {
		return nil, err
	}
	var content []byte
	f, fi, err := openRegular(target, nil)
	switch {
	case err == nil:
		if fi.Size() > MaxEditFileBytes {
			f.Close()
			return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s is %d bytes, more than Edit handles (%d); edit it with Bash (sed) instead", path, fi.Size(), MaxEditFileBytes))
		}
		content, err = readAllLimit(ctx, f, MaxEditFileBytes)
		f.Close()
		if err != nil {
			return nil, err
		}
		if a.Expect == nil {
			return nil, notReadError(path)
		}
		if err := checkExpect(path, content, fi, a.Expect); err != nil {
			return nil, err
		}
	case errcode.Of(err) == errcode.ErrnoENOENT && len(a.Edits) > 0 && a.Edits[0].OldString == "":
		// Claude Code lets Edit create a file from an empty old_string.
		fi = nil
	default:
		return nil, err
	}
	res, err := ApplyEdits(path, string(content), a.Edits)
	if err != nil {
		return nil, err
	}
	reply, err := writeAtomic(path, target, []byte(res.Content), fi)
	if err != nil {
		return nil, err
	}
	reply.Replacements = res.Replacements
	reply.Fuzzy = res.Fuzzy
	reply.Snippet = Snippet(res.Content, res.Start, res.End, 4, 40)
	return reply, nil
}

func cleanAbs(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", errcode.Msg(errcode.Validation, fmt.Sprintf("path %q is not absolute; pass an absolute path", p))
	}
	if err := slashEnd(p, true); err != nil {
		return "", err
	}
	p = filepath.Clean(p)
	if under(p, "/proc") || under(p, "/dev") || under(p, "/sys") {
		return "", errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("refusing to write under %s; write regular files in the workspace", p))
	}
	return p, nil
}

// writeAtomic replaces target, the file path leads to (writeTarget), with content: a temp file
// in the same directory, the old mode and ownership, then rename, so readers never see a half
// file. Missing parent directories are created. The directory is opened without following
// any symlink and the temp file made and renamed inside it, so the write lands on target's
// name there whatever is swapped in meanwhile (a symlink at the name is replaced, never
// followed). old is the current file's info, nil if new.
func writeAtomic(path, target string, content []byte, old fs.FileInfo) (*WriteReply, error) {
	dir, base := filepath.Dir(target), filepath.Base(target)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("create directory %s: %w; check that the path is inside a writable directory", dir, unwrapPath(err)))
	}
	dfd, err := openDirNoFollow(dir)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EXDEV) {
			return nil, errcode.Msg(errcode.Conflict, fmt.Sprintf("refused to write %s: its directory %s changed since the permission decision (a symlink is there now); write it again", path, dir))
		}
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("open directory %s: %w", dir, err))
	}
	defer unix.Close(dfd)
	mode := 0o666 &^ umask
	if old != nil {
		mode = old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		// The rename below needs only the directory's write bit: without this, a file its
		// owner made read-only (or another user's, in a shared directory) would be replaced
		// where the caller's own open for writing is refused, as the agent's Write is.
		if err := unix.Faccessat(dfd, base, unix.W_OK, unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.EACCES) {
			return nil, errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("%s is read-only to you (mode %s); refusing to replace it: make it writable first if it should change", path, old.Mode().Perm()))
		}
	}
	tmpName, tmp, err := createTempAt(dfd, "."+base+".sbx-")
	if err != nil {
		if old != nil && errors.Is(err, fs.ErrPermission) {
			// A writable file in a directory the owner may not add to: write in place.
			return writeInPlace(path, target, dfd, content)
		}
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("create temp file in %s: %w; check the directory is writable", dir, unwrapPath(err)))
	}
	fail := func(err error) (*WriteReply, error) {
		tmp.Close()
		_ = unix.Unlinkat(dfd, tmpName, 0)
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w", path, unwrapPath(err)))
	}
	if _, err := tmp.Write(content); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fail(err)
	}
	if old != nil {
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			// Keeps the group (and the owner, when the file was the caller's own); a file of
			// another owner becomes the caller's, as any editor saving over it would.
			_ = tmp.Chown(int(st.Uid), int(st.Gid))
		}
	}
	if err := tmp.Close(); err != nil {
		_ = unix.Unlinkat(dfd, tmpName, 0)
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w", path, unwrapPath(err)))
	}
	if err := unix.Renameat(dfd, tmpName, dfd, base); err != nil {
		_ = unix.Unlinkat(dfd, tmpName, 0)
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("replace %s: %w", path, unwrapPath(err)))
	}
	return written(path, target, content, old == nil)
}

// openDirNoFollow opens dir (O_PATH) for the *at calls of a write, refusing a symlink in any
// component (ELOOP).
func openDirNoFollow(dir string) (int, error) {
	flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.6: the last component at least is not followed.
		fd, err = unix.Open(dir, flags|unix.O_NOFOLLOW, 0)
	}
	return fd, err
}

// createTempAt makes a new file named prefix plus a random suffix in the directory dfd, as
// os.CreateTemp does in a named one.
func createTempAt(dfd int, prefix string) (string, *os.File, error) {
	for range 10000 {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 10)
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		return name, os.NewFile(uintptr(fd), name), nil
	}
	return "", nil, &fs.PathError{Op: "open", Path: prefix + "*", Err: fs.ErrExist}
}

func writeInPlace(path, target string, dfd int, content []byte) (*WriteReply, error) {
	fd, err := unix.Openat(dfd, filepath.Base(target), unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w; check its permissions", path, err))
	}
	f := os.NewFile(uintptr(fd), target)
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("%s is not a regular file; refusing to write to it", path))
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w", path, unwrapPath(err)))
	}
	if err := f.Close(); err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w", path, unwrapPath(err)))
	}
	return written(path, target, content, false)
}

func written(path, target string, content []byte, created bool) (*WriteReply, error) {
	fi, err := os.Stat(target)
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("stat %s after writing: %w", path, unwrapPath(err)))
	}
	r := &WriteReply{FileInfo: fileInfo(path, fi), Created: created}
	r.SHA256 = sha256hex(content)
	r.Lines = bytes.Count(content, []byte("\n"))
	if len(content) > 0 && content[len(content)-1] != '\n' {
		r.Lines++
	}
	return r, nil
}
