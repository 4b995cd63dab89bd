package sandbox

import "errors"

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("sandbox closed")

// ErrBadSpec is returned by Start for a spec that cannot be run (no path, no session or call).
var ErrBadSpec = errors.New("invalid sandbox spec")

// ErrInitFailed wraps a failure the child reported before exec; nothing of the user's ran.
var ErrInitFailed = errors.New("sandbox init failed")
