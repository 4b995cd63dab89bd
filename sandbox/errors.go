package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("sandbox closed")

// ErrDirMoved is returned by Start for a call whose directory no longer leads where it did:
// a dir on its way was replaced by a link out of the dir it lay in, or by one at all between
// the plan and the child's chdir, or the dir is gone. Nothing of the user's ran.
var ErrDirMoved = errors.New("the call's directory no longer leads where it did")

// ErrBadSpec is returned by Start for a spec that cannot be run (no path, no session or call).
var ErrBadSpec = errors.New("invalid sandbox spec")

// ErrInitFailed wraps a failure the child reported before exec; nothing of the user's ran.
var ErrInitFailed = errors.New("sandbox init failed")

// InitError is the child's report of the setup step that failed; the program never ran.
type InitError struct {
	Errno syscall.Errno
	Step  string
}

// Error says which step failed and why.
func (e *InitError) Error() string { return fmt.Sprintf("sandbox init: %s: %v", e.Step, e.Errno) }

// Unwrap lets callers test errors.Is(err, ErrInitFailed) or errors.Is(err, syscall.ENOENT).
// A chdir that failed for want of the dir (removed, or a file in its place) is ErrDirMoved too,
// and so is one the call may not enter (a dir a deny rule hides, which a shell's exit report
// named as its cwd; a dir on the way the call made unsearchable): it no longer leads anywhere
// a call can run.
func (e *InitError) Unwrap() []error {
	if strings.HasPrefix(e.Step, "chdir moved") || strings.HasPrefix(e.Step, "chdir:") && (e.Errno == syscall.ENOENT || e.Errno == syscall.ENOTDIR || e.Errno == syscall.EACCES) {
		return []error{ErrInitFailed, ErrDirMoved, e.Errno}
	}
	return []error{ErrInitFailed, e.Errno}
}

func decodeInitError(b []byte) error {
	if len(b) < 8 {
		return fmt.Errorf("%w: short report", ErrInitFailed)
	}
	code := binary.NativeEndian.Uint32(b)
	n := binary.NativeEndian.Uint32(b[4:])
	msg := b[8:]
	if int(n) < len(msg) {
		msg = msg[:n]
	}
	return &InitError{Errno: syscall.Errno(code), Step: string(bytes.ToValidUTF8(msg, nil))}
}
