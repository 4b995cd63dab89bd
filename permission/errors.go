package permission

import "errors"

// Sentinels callers test with errors.Is.
var (
	// ErrMalformedRule wraps every rule-syntax error; the message says why.
	ErrMalformedRule = errors.New("malformed permission rule")
	// ErrBadSettings wraps a settings file that does not parse or breaks a constraint.
	ErrBadSettings = errors.New("bad settings file")
	// ErrUntrustedPolicyFile is returned for an admin policy file (or its directory) that is not
	// owned by root or is writable by others: its rules could have been planted by anyone.
	ErrUntrustedPolicyFile = errors.New("untrusted policy file")
	// ErrModeDisabled is returned when admin policy forbids the requested mode.
	ErrModeDisabled = errors.New("permission mode disabled by policy")
)
