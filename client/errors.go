package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/protocol"
)

// ErrUnavailable is wrapped by every error that means the daemon could not be reached at all
// (no socket, nobody listening, permission denied on the socket): nothing was sent.
var ErrUnavailable = errors.New("sandboxd unavailable")

// APIError is an error answer of the daemon: its HTTP status and {"error":{…}} body.
type APIError struct {
	Status int
	Detail protocol.ErrorDetail
}

func (e *APIError) Error() string {
	msg := e.Detail.Message
	if len(e.Detail.Suggestions) > 0 && !strings.Contains(msg, "did you mean") {
		msg += " (did you mean " + strings.Join(e.Detail.Suggestions, ", ") + "?)"
	}
	return fmt.Sprintf("%s [%s]", msg, e.Detail.Class)
}

// NoAnswer reports whether err is a failure to get any answer from the daemon (it could not be
// reached, the connection broke, the context ended), as opposed to an error answer (*APIError).
func NoAnswer(err error) bool {
	var ae *APIError
	return err != nil && !errors.As(err, &ae)
}
