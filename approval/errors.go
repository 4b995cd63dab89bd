package approval

import "errors"

// Sentinels of the queue. ErrNotFound also covers an approval the caller may not see, so
// another uid cannot probe for ids.
var (
	ErrNotFound = errors.New("approval not found")
	ErrAnswered = errors.New("approval already answered")
	ErrFull     = errors.New("too many pending approvals")
)
