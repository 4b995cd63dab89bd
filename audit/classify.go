package audit

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Classify maps err to its stable, telemetry-safe class for the record's outcome.error and for
// metrics. It never reads the message: typed codes (*errcode.Error) win, then errnos, context
// and fs sentinels (errcode.Of), then the shapes below. Raw messages go only to the caller.
func Classify(err error) errcode.Code {
	if err == nil {
		return errcode.OK
	}
	if c := errcode.Of(err); c != errcode.Internal {
		return c
	}
	var (
		syn   *json.SyntaxError
		typ   *json.UnmarshalTypeError
		exitE *exec.ExitError
	)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errcode.Timeout
	case errors.Is(err, fs.ErrExist):
		return errcode.ErrnoEEXIST
	case errors.Is(err, fs.ErrInvalid):
		return errcode.Validation
	case errors.As(err, &syn), errors.As(err, &typ):
		return errcode.BadRequest
	case errors.As(err, &exitE):
		// A non-zero exit is the tool's answer, not a daemon fault.
		return errcode.ToolFailed
	case errors.Is(err, exec.ErrNotFound):
		return errcode.ErrnoENOENT
	case errors.Is(err, ErrClosed):
		return errcode.AuditUnavailable
	case errors.Is(err, ErrUnknownKind), errors.Is(err, ErrReservedKind):
		return errcode.Validation
	}
	return errcode.Internal
}
