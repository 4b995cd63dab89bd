// Package errcode is the closed set of telemetry-safe error codes: stable snake_case names that
// carry no paths, commands or user text, so they can go into metrics and audit records.
package errcode

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
)

// Code is one stable, telemetry-safe error name.
type Code string

// The closed set. Add here, never build a Code from user text.
const (
	OK               Code = "ok"
	Validation       Code = "validation"
	SchemaInvalid    Code = "schema_invalid"
	UnknownTool      Code = "unknown_tool"
	NotFound         Code = "not_found"
	PermissionDenied Code = "permission_denied"
	AskRequired      Code = "ask_required"
	Timeout          Code = "timeout"
	Cancelled        Code = "cancelled"
	OOM              Code = "oom"
	PidsLimit        Code = "pids_limit"
	SandboxSetup     Code = "sandbox_setup_error"
	PolicyEval       Code = "policy_eval_error"
	PolicyNotLoaded  Code = "policy_not_loaded"
	ClassifyParse    Code = "classify_parse_error"
	AuditUnavailable Code = "audit_unavailable"
	HookError        Code = "hook_error"
	BadRequest       Code = "bad_request"
	TooLarge         Code = "too_large"
	Stale            Code = "stale"
	Conflict         Code = "conflict"
	Unavailable      Code = "unavailable"
	TooManyCalls     Code = "too_many_calls"
	RateLimited      Code = "rate_limited"
	Internal         Code = "internal"
	ToolFailed       Code = "tool_failed"
	ErrnoENOENT      Code = "ENOENT"
	ErrnoEACCES      Code = "EACCES"
	ErrnoEPERM       Code = "EPERM"
	ErrnoEISDIR      Code = "EISDIR"
	ErrnoENOTDIR     Code = "ENOTDIR"
	ErrnoENOSPC      Code = "ENOSPC"
	ErrnoEEXIST      Code = "EEXIST"
	ErrnoEROFS       Code = "EROFS"
	ErrnoEIO         Code = "EIO"
	ErrnoELOOP       Code = "ELOOP"
	ErrnoEDQUOT      Code = "EDQUOT"
	ErrnoEFBIG       Code = "EFBIG"
	ErrnoEMFILE      Code = "EMFILE"
	ErrnoEBUSY       Code = "EBUSY"
)

// Error is an error with a telemetry-safe code; Err carries the detail for the caller.
type Error struct {
	Code Code
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return string(e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is lets an errno code that crossed a process boundary (the worker's wire errors) still
// answer errors.Is(err, fs.ErrNotExist) and friends.
func (e *Error) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e.Code == ErrnoENOENT
	case fs.ErrPermission:
		return e.Code == ErrnoEACCES || e.Code == ErrnoEPERM
	case fs.ErrExist:
		return e.Code == ErrnoEEXIST
	case syscall.EROFS:
		return e.Code == ErrnoEROFS
	case syscall.EBUSY:
		return e.Code == ErrnoEBUSY
	}
	return false
}

// New wraps err with code.
func New(code Code, err error) *Error { return &Error{Code: code, Err: err} }

// Audit is the error of a record the audit log did not take: AuditUnavailable, unless the
// log refused it for its owner's budget (RateLimited), which is that user's to wait out and
// not the log's failure.
func Audit(err error) *Error {
	if Of(err) == RateLimited {
		return New(RateLimited, err)
	}
	return New(AuditUnavailable, err)
}

// Setup is the error of a sandbox that could not be set up: SandboxSetup, unless it was
// refused for its owner's share of the daemon (RateLimited, anywhere in its chain), which is
// that user's to wait out.
func Setup(err error) *Error {
	if carries(err, RateLimited) {
		return New(RateLimited, err)
	}
	return New(SandboxSetup, err)
}

// carries reports an *Error of code anywhere in err's chain.
func carries(err error, code Code) bool {
	switch e := err.(type) {
	case nil:
		return false
	case *Error:
		if e.Code == code {
			return true
		}
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			if carries(x, code) {
				return true
			}
		}
		return false
	}
	return carries(errors.Unwrap(err), code)
}

// Errorf-free constructor for a message: errcode.Msg(errcode.Validation, "offset must be >= 0").
func Msg(code Code, msg string) *Error { return &Error{Code: code, Err: errors.New(msg)} }

var errnoCodes = map[syscall.Errno]Code{
	syscall.ENOENT:  ErrnoENOENT,
	syscall.EACCES:  ErrnoEACCES,
	syscall.EPERM:   ErrnoEPERM,
	syscall.EISDIR:  ErrnoEISDIR,
	syscall.ENOTDIR: ErrnoENOTDIR,
	syscall.ENOSPC:  ErrnoENOSPC,
	syscall.EEXIST:  ErrnoEEXIST,
	syscall.EROFS:   ErrnoEROFS,
	syscall.EIO:     ErrnoEIO,
	syscall.ELOOP:   ErrnoELOOP,
	syscall.EDQUOT:  ErrnoEDQUOT,
	syscall.EFBIG:   ErrnoEFBIG,
	syscall.EMFILE:  ErrnoEMFILE,
	syscall.EBUSY:   ErrnoEBUSY,
}

// Of classifies any error into a Code. It never looks at the message text.
func Of(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Cancelled
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if c, ok := errnoCodes[errno]; ok {
			return c
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ErrnoENOENT
	case errors.Is(err, fs.ErrPermission):
		return ErrnoEACCES
	}
	return Internal
}
