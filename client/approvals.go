package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"
)

// Approval is one pending question as GET /v1/approvals shows it (approval.Approval).
type Approval struct {
	ID string `json:"id"`
	// Session is the session whose call asks; ParentSession, when the ask bubbled up, the
	// session whose queue holds it.
	Session        string          `json:"session"`
	ParentSession  string          `json:"parent_session,omitempty"`
	Owner          uint32          `json:"owner_uid"`
	Tool           string          `json:"tool"`
	Input          json.RawMessage `json:"input"`
	Reason         string          `json:"reason"`
	SuggestedRules []string        `json:"suggested_rules"`
	Preview        *Preview        `json:"preview,omitempty"`
	Created        time.Time       `json:"created"`
	Expires        time.Time       `json:"expires"`
}

// Preview is what an approved edit writes (approval.Preview).
type Preview struct {
	Path      string `json:"path"`
	Diff      string `json:"diff"`
	Exists    bool   `json:"exists"`
	SHA256    string `json:"sha256,omitempty"`
	NewSHA256 string `json:"new_sha256"`
}

// Resolution is how an approval ended (approval.Resolution).
type Resolution struct {
	Answer   string    `json:"answer"`
	Remember string    `json:"remember,omitempty"`
	Rule     string    `json:"rule,omitempty"`
	Message  string    `json:"message,omitempty"`
	By       string    `json:"by"`
	When     time.Time `json:"when"`
}

// ApprovalEvent is one line of GET /v1/approvals/stream (approval.Event): created, answered
// or expired.
type ApprovalEvent struct {
	Type       string      `json:"type"`
	Approval   Approval    `json:"approval"`
	Resolution *Resolution `json:"resolution,omitempty"`
}

// ApprovalList is the body of GET /v1/approvals.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalAnswer is the body of POST /v1/approvals/{id}.
type ApprovalAnswer struct {
	Answer   string `json:"answer"` // allow or deny
	Remember string `json:"remember,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Message  string `json:"message,omitempty"`
}

// ApprovalAnswered is the response of POST /v1/approvals/{id}.
type ApprovalAnswered struct {
	Approval   Approval   `json:"approval"`
	Resolution Resolution `json:"resolution"`
}

// Approvals is GET /v1/approvals: the caller's pending approvals, oldest first.
func (c *Client) Approvals(ctx context.Context) ([]Approval, error) {
	var l ApprovalList
	if err := c.Do(ctx, MethodGet, "/v1/approvals", nil, &l); err != nil {
		return nil, err
	}
	return l.Approvals, nil
}

// AnswerApproval is POST /v1/approvals/{id}.
func (c *Client) AnswerApproval(ctx context.Context, id string, a ApprovalAnswer) (ApprovalAnswered, error) {
	var out ApprovalAnswered
	err := c.Do(ctx, MethodPost, "/v1/approvals/"+url.PathEscape(id), a, &out)
	return out, err
}

// StreamApprovals follows GET /v1/approvals/stream, handing each event to fn (first the
// approvals already pending, as created) until the stream ends, ctx ends or fn fails. The
// daemon cuts off a reader that falls far behind: the stream then ends with a nil error and
// the caller reconnects.
func (c *Client) StreamApprovals(ctx context.Context, fn func(ApprovalEvent) error) error {
	resp, err := c.send(ctx, MethodGet, "/v1/approvals/stream", nil, "application/x-ndjson")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return statusError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev ApprovalEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Type == "" {
			return fmt.Errorf("bad approval event line: %q", sc.Bytes())
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read approval events: %w", err)
	}
	return nil
}
