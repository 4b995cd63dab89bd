package sandbox

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("sandbox closed")

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
func (e *InitError) Unwrap() []error { return []error{ErrInitFailed, e.Errno} }

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
