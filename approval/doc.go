// Package approval is the daemon's queue of pending approvals: asks waiting for a person (or a parent session's person) to allow or deny them.
package approval
