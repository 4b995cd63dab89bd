package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/sandboxd/sandboxd/protocol"
)

// Approvals is GET /v1/approvals: the caller's pending approvals, oldest first.
func (c *Client) Approvals(ctx context.Context) ([]protocol.Approval, error) {
	var l protocol.ApprovalList
	if err := c.Do(ctx, MethodGet, "/v1/approvals", nil, &l); err != nil {
		return nil, err
	}
	return l.Approvals, nil
}

// AnswerApproval is POST /v1/approvals/{id}.
func (c *Client) AnswerApproval(ctx context.Context, id string, a protocol.ApprovalAnswer) (protocol.ApprovalAnswered, error) {
	var out protocol.ApprovalAnswered
	err := c.Do(ctx, MethodPost, "/v1/approvals/"+url.PathEscape(id), a, &out)
	return out, err
}

// StreamApprovals follows GET /v1/approvals/stream, handing each event to fn (first the
// approvals already pending, as created) until the stream ends, ctx ends or fn fails. The
// daemon cuts off a reader that falls far behind: the stream then ends with a nil error and
// the caller reconnects.
func (c *Client) StreamApprovals(ctx context.Context, fn func(protocol.ApprovalEvent) error) error {
	return c.streamLines(ctx, "/v1/approvals/stream", "application/x-ndjson", "approval events", func(line []byte) error {
		var ev protocol.ApprovalEvent
		if err := json.Unmarshal(line, &ev); err != nil || ev.Type == "" {
			return fmt.Errorf("bad approval event line: %q", line)
		}
		return fn(ev)
	})
}
