package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/internal/unixhttp"
	"github.com/sandboxd/sandboxd/protocol"
)

// Client speaks the daemon's HTTP+JSON protocol over its Unix socket.
type Client struct {
	HTTP    *http.Client
	timeout time.Duration // of each request made through Do; 0: none
}

// NewClient returns a client with a per-request timeout (0: none). Keep-alive connections
// are kept, as an agent harness would. The timeout rides on each request's context:
// http.Client.Timeout would start a goroutine and a timer for every request.
func NewClient(socket string, timeout time.Duration) *Client {
	return &Client{HTTP: &http.Client{Transport: unixhttp.New(socket, 256)}, timeout: timeout}
}

// StatusError is a non-2xx answer with the daemon's error body.
type StatusError struct {
	Status int
	Body   protocol.ErrorBody
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Body.Error.Class, e.Body.Error.Message)
}

// Do sends body (nil, []byte as is, or a value to encode) and decodes a 2xx answer into out.
// It returns the status; a non-2xx status is a *StatusError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(js)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sandboxd"+path, rd)
	if err != nil {
		return 0, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read response: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Status: resp.StatusCode}
		_ = json.Unmarshal(data, &se.Body)
		// A call's result object also comes with a non-2xx status (503 audit_unavailable).
		if out != nil {
			_ = json.Unmarshal(data, out)
		}
		return resp.StatusCode, se
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode response: %w", err)
		}
	}
	return resp.StatusCode, nil
}

// Health is GET /v1/healthz.
func (c *Client) Health(ctx context.Context) (protocol.Health, error) {
	var h protocol.Health
	_, err := c.Do(ctx, http.MethodGet, "/v1/healthz", nil, &h)
	return h, err
}

// CreateSession is POST /v1/sessions.
func (c *Client) CreateSession(ctx context.Context, cs protocol.CreateSession) (protocol.Session, error) {
	var s protocol.Session
	_, err := c.Do(ctx, http.MethodPost, "/v1/sessions", cs, &s)
	return s, err
}

// DeleteSession is DELETE /v1/sessions/{id}.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.Do(ctx, http.MethodDelete, "/v1/sessions/"+id, nil, nil)
	return err
}

// Call is POST /v1/sessions/{id}/calls. A result object is returned with any status that
// carries one; err is a transport error or a *StatusError.
func (c *Client) Call(ctx context.Context, sid string, cr protocol.CallRequest) (protocol.CallResult, int, error) {
	var res protocol.CallResult
	st, err := c.Do(ctx, http.MethodPost, "/v1/sessions/"+sid+"/calls", cr, &res)
	return res, st, err
}

// Decide is POST /v1/sessions/{id}/decide.
func (c *Client) Decide(ctx context.Context, sid string, cr protocol.CallRequest) (protocol.CallResult, error) {
	var res protocol.CallResult
	_, err := c.Do(ctx, http.MethodPost, "/v1/sessions/"+sid+"/decide", cr, &res)
	return res, err
}

// Input encodes a tool input.
func Input(v map[string]any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a map of plain values always encodes
	}
	return b
}

// IsTransport reports whether err is a failure to get any answer (not a *StatusError).
func IsTransport(err error) bool {
	var se *StatusError
	return err != nil && !errors.As(err, &se)
}
