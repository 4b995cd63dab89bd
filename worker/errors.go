package worker

import "errors"

// ErrGone is returned for requests in flight when the worker process died or was closed;
// the daemon starts a new worker on the next call.
var ErrGone = errors.New("file worker exited")

// ErrFrameTooLarge is returned for a frame past MaxFrameBytes; the connection is then unusable.
var ErrFrameTooLarge = errors.New("worker frame too large")

// ErrBroken is returned when the worker answered out of protocol (a request's answer without
// its reply); its connection is closed, so the daemon starts a new worker on the next call.
var ErrBroken = errors.New("file worker broke the protocol")
