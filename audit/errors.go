package audit

import "errors"

// Sentinels; test with errors.Is. Append wraps write failures in *errcode.Error with
// errcode.AuditUnavailable so the executor fails closed without string matching.
var (
	// ErrClosed is returned by Append after Close.
	ErrClosed = errors.New("audit log closed")
	// ErrUnknownKind rejects a record whose kind is not in the documented set.
	ErrUnknownKind = errors.New("unknown record kind")
	// ErrReservedKind rejects a caller-supplied audit.* record: only the log writes those, so
	// nobody can forge a checkpoint, rotation or torn-tail marker through Append.
	ErrReservedKind = errors.New("record kind is reserved for the audit log")
	// ErrCorrupt means a complete line that the log must chain onto does not verify; the log
	// refuses to open rather than chain over it (run Verify to see where).
	ErrCorrupt = errors.New("audit log corrupt")
	// ErrTampered is returned by Verify when the chain, a hash or a signature does not hold.
	ErrTampered = errors.New("audit log does not verify")
	// ErrTornTail is returned by Verify when the last line is incomplete (a crash that Open has
	// not yet recovered, or a truncated copy).
	ErrTornTail = errors.New("audit log has a torn last line")
	// ErrCutBack is returned by Verify when the log holds an audit.cut_back record: a start
	// found fewer records than the signed head covered, a different record at its seq, or no
	// log at all. The chain after it is whole, so it is not ErrTampered, but records were lost.
	ErrCutBack = errors.New("audit log lost records while the daemon was down")
	// ErrKeyReplaced is returned by Verify when checkpoints before an audit.key_replaced record
	// were signed by a key that was not given: not tampering (the chain and the new key's
	// signatures hold), but those records are held by the chain alone.
	ErrKeyReplaced = errors.New("audit log signed in part by a replaced key that was not given")
	// ErrNoHead is returned by Verify when a public key is given but no signed head is found.
	ErrNoHead = errors.New("no signed audit head")
	// ErrInsecureDir refuses an audit or key directory that is a symlink or owned by another user.
	ErrInsecureDir = errors.New("insecure audit directory")
	// ErrLowSpace refuses a record of new work while the audit volume is short of space
	// (Config.MinFreeBytes).
	ErrLowSpace = errors.New("audit volume short of space")
	// ErrOwnerBudget refuses a record of new work of a uid whose records took their hourly
	// bytes (Config.MaxBytesPerUserHour).
	ErrOwnerBudget = errors.New("audit bytes per user exceeded")
	// ErrBadKey is returned for an unreadable or malformed key file.
	ErrBadKey = errors.New("bad audit key")
)

var errTrailingData = errors.New("trailing data after JSON value")
