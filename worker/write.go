package worker

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

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

// WARNING: writes where the agent says, as the owner; the policy has decided on the path
// resolved the same way. Rerun TestWriteAtomicKeepsModeAndOwner, TestWriteTool and TestEditTool as root after changing.
func doWrite(a *WriteArgs, content []byte) (*WriteReply, error) {
	path, err := cleanAbs(a.Path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
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
			f, _, err := openRegular(path)
			if err != nil {
				return nil, err
			}
			cur, err = readAllLimit(f, MaxEditFileBytes)
			f.Close()
			if err != nil {
				return nil, err
			}
		}
		if err := checkExpect(path, cur, fi, a.Expect); err != nil {
			return nil, err
		}
	case isNotExist(err):
		if l, lerr := os.Lstat(path); lerr == nil && l.Mode()&fs.ModeSymlink != 0 {
			return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("%s is a symlink to a missing file; write to the target path instead", path))
		}
		fi = nil
	default:
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("stat %s: %w; check the path and its permissions", path, unwrapPath(err)))
	}
	return writeAtomic(path, content, fi)
}

func doEdit(a *EditArgs) (*WriteReply, error) {
	path, err := cleanAbs(a.Path)
	if err != nil {
		return nil, err
	}
	var content []byte
	f, fi, err := openRegular(path)
	switch {
	case err == nil:
		if fi.Size() > MaxEditFileBytes {
			f.Close()
			return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s is %d bytes, more than Edit handles (%d); edit it with Bash (sed) instead", path, fi.Size(), MaxEditFileBytes))
		}
		content, err = readAllLimit(f, MaxEditFileBytes)
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
	reply, err := writeAtomic(path, []byte(res.Content), fi)
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
	p = filepath.Clean(p)
	if under(p, "/proc") || under(p, "/dev") || under(p, "/sys") {
		return "", errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("refusing to write under %s; write regular files in the workspace", p))
	}
	return p, nil
}

// writeAtomic replaces path (following a symlink to its target) with content: a temp file in
// the same directory, the old mode and ownership, then rename, so readers never see a half
// file. Missing parent directories are created. old is the current file's info, nil if new.
func writeAtomic(path string, content []byte, old fs.FileInfo) (*WriteReply, error) {
	target := path
	if old != nil {
		if r, err := filepath.EvalSymlinks(path); err == nil {
			target = r
		}
	}
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("create directory %s: %w; check that the path is inside a writable directory", dir, unwrapPath(err)))
	}
	mode := 0o666 &^ umask
	if old != nil {
		mode = old.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".sbx-*")
	if err != nil {
		if old != nil && errors.Is(err, fs.ErrPermission) {
			// A writable file in a directory the owner may not add to: write in place.
			return writeInPlace(path, target, content, old)
		}
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("create temp file in %s: %w; check the directory is writable", dir, unwrapPath(err)))
	}
	fail := func(err error) (*WriteReply, error) {
		tmp.Close()
		os.Remove(tmp.Name())
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
		os.Remove(tmp.Name())
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w", path, unwrapPath(err)))
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		os.Remove(tmp.Name())
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("replace %s: %w", path, unwrapPath(err)))
	}
	return written(path, target, content, old == nil)
}

func writeInPlace(path, target string, content []byte, old fs.FileInfo) (*WriteReply, error) {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("write %s: %w; check its permissions", path, unwrapPath(err)))
	}
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
