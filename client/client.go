package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// maxResponseBytes bounds what one answer may make the client hold; the daemon's own
// limits.response_bytes is far below it.
const maxResponseBytes = 256 << 20

// HTTP methods the protocol uses.
const (
	MethodGet    = "GET"
	MethodPost   = "POST"
	MethodPatch  = "PATCH"
	MethodDelete = "DELETE"
)

// Client talks HTTP/1.1 over the daemon's Unix socket (http1.go). It is safe for concurrent
// use.
type Client struct {
	socket string
	opts   Options

	mu   sync.Mutex
	idle []*conn // kept connections, most recently used last
}

// Options tune a client for a long-lived caller (an agent harness, a benchmark); a CLI making a
// request or two wants none of them.
type Options struct {
	// KeepAlive is how many idle connections are kept for later requests; 0 closes each
	// connection after its answer.
	KeepAlive int
	// Timeout bounds each request made through Do or Send (and the methods built on them),
	// reading the answer included; 0: none. Streams are bounded by their context only.
	Timeout time.Duration
	// Dial opens a connection to the daemon in place of connecting to the socket, e.g. one
	// made with another user's credentials.
	Dial func(ctx context.Context) (Conn, error)
}

// New returns a client of the daemon at socket, a connection per request.
func New(socket string) *Client {
	return &Client{socket: socket}
}

// NewWith returns a client of the daemon at socket with options o.
func NewWith(socket string, o Options) *Client {
	return &Client{socket: socket, opts: o}
}

// Socket is the socket path the client dials.
func (c *Client) Socket() string { return c.socket }

// Do sends body (nil, a json.RawMessage as is, or a value to encode) and decodes a 2xx answer
// into out (a *json.RawMessage keeps it as is). A call's result comes back with its own error
// field and sometimes a non-2xx status (503 audit_unavailable), so it is decoded whatever the
// status when out is a *CallResult; any other non-2xx answer is an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.Send(ctx, method, path, body, out)
	return err
}

// Send is Do that also returns the answer's HTTP status (0 when none came).
func (c *Client) Send(ctx context.Context, method, path string, body, out any) (int, error) {
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	resp, err := c.send(ctx, method, path, body, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("read response: %w", ctxOr(ctx, err))
	}
	if cr, ok := out.(*protocol.CallResult); ok && len(data) > 0 && resp.StatusCode != 404 {
		if err := json.Unmarshal(data, cr); err == nil && cr.Tool != "" {
			return resp.StatusCode, nil
		}
	}
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, statusError(resp.StatusCode, data)
	}
	if out == nil || len(data) == 0 {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("decode response: %w", err)
	}
	return resp.StatusCode, nil
}

// Open sends a request and returns the answer, whatever its status, for the caller to read
// (accept: the Accept header, or ""). The caller closes its body.
func (c *Client) Open(ctx context.Context, method, path string, body any, accept string) (*Response, error) {
	return c.send(ctx, method, path, body, accept)
}

// Stream sends a call asking for NDJSON progress and hands each event to onEvent as it comes;
// it returns the call's result.
func (c *Client) Stream(ctx context.Context, sessionID string, req protocol.CallRequest, onEvent func(protocol.Event)) (*protocol.CallResult, error) {
	resp, err := c.send(ctx, MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/calls", req, "application/x-ndjson")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, statusError(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxResponseBytes)
	for sc.Scan() {
		var line protocol.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("bad stream line: %w", err)
		}
		if line.Result != nil {
			return line.Result, nil
		}
		if line.Event != nil && onEvent != nil {
			onEvent(*line.Event)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read stream: %w", ctxOr(ctx, err))
	}
	return nil, errors.New("the daemon closed the stream before the result")
}

// Records streams GET /v1/audit/records with query q, handing each line (raw) and its
// decoded head to fn until the stream ends, ctx ends or fn fails.
func (c *Client) Records(ctx context.Context, q url.Values, fn func(raw []byte, r *protocol.Record) error) error {
	return c.streamLines(ctx, "/v1/audit/records?"+q.Encode(), "", "records", func(line []byte) error {
		var r protocol.Record
		if err := json.Unmarshal(line, &r); err != nil || r.Seq == 0 {
			// The daemon ends a stream that fails midway with an error object.
			var eb protocol.ErrorBody
			if json.Unmarshal(line, &eb) == nil && eb.Error.Class != "" {
				return &APIError{Status: 500, Detail: eb.Error}
			}
			return fmt.Errorf("bad record line: %q", line)
		}
		return fn(line, &r)
	})
}

// RawLines streams the lines of a GET of path (NDJSON) to fn as they are.
func (c *Client) RawLines(ctx context.Context, path string, fn func(line []byte) error) error {
	return c.streamLines(ctx, path, "", "lines", fn)
}

// streamLines GETs path and hands each line of its body (NDJSON) to fn until the body ends,
// ctx ends (not an error: the caller stopped) or fn fails.
func (c *Client) streamLines(ctx context.Context, path, accept, what string, fn func([]byte) error) error {
	resp, err := c.send(ctx, MethodGet, path, nil, accept)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return statusError(resp.StatusCode, data)
	}
	// A line past maxLine (an audit record written before records were bounded) is skipped,
	// not the end of the stream: what follows it is still shown, and the skip is reported.
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var buf []byte
	over, skipped := false, 0
	for {
		chunk, err := br.ReadSlice('\n')
		if !over {
			if len(buf)+len(chunk) > maxLine {
				over, buf = true, buf[:0]
			} else {
				buf = append(buf, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		whole := err == nil || err == io.EOF && len(buf) > 0
		if over {
			skipped++
		} else if whole {
			line := bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
			if ferr := fn(line); ferr != nil {
				return ferr
			}
		}
		buf, over = buf[:0], false
		if err != nil {
			var skip error
			if skipped > 0 {
				skip = fmt.Errorf("read %s: %d lines over %d MiB were skipped", what, skipped, maxLine>>20)
			}
			if ctx.Err() != nil || err == io.EOF {
				return skip
			}
			return errors.Join(fmt.Errorf("read %s: %w", what, err), skip)
		}
	}
}

// maxLine is the longest NDJSON line streamLines hands on.
const maxLine = 16 << 20

// Health is GET /v1/healthz.
func (c *Client) Health(ctx context.Context) (protocol.Health, error) {
	var h protocol.Health
	err := c.Do(ctx, MethodGet, "/v1/healthz", nil, &h)
	return h, err
}

// CreateSession is POST /v1/sessions.
func (c *Client) CreateSession(ctx context.Context, cs protocol.CreateSession) (protocol.Session, error) {
	var s protocol.Session
	err := c.Do(ctx, MethodPost, "/v1/sessions", cs, &s)
	return s, err
}

// Session is GET /v1/sessions/{id}.
func (c *Client) Session(ctx context.Context, id string) (protocol.Session, error) {
	var s protocol.Session
	err := c.Do(ctx, MethodGet, "/v1/sessions/"+url.PathEscape(id), nil, &s)
	return s, err
}

// DeleteSession is DELETE /v1/sessions/{id}: it ends the session and kills its processes.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.Do(ctx, MethodDelete, "/v1/sessions/"+url.PathEscape(id), nil, nil)
}

// Call runs one tool call and returns its result (a denied or asked call is a result too).
func (c *Client) Call(ctx context.Context, sessionID string, req protocol.CallRequest) (*protocol.CallResult, error) {
	var res protocol.CallResult
	if err := c.Do(ctx, MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/calls", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Decide returns the decision the call would get; nothing runs.
func (c *Client) Decide(ctx context.Context, sessionID string, req protocol.CallRequest) (*protocol.CallResult, error) {
	var res protocol.CallResult
	if err := c.Do(ctx, MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/decide", req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Tools is GET /v1/tools (for sessionID's pool when it is not empty).
func (c *Client) Tools(ctx context.Context, sessionID string) (protocol.ToolList, error) {
	var tl protocol.ToolList
	path := "/v1/tools"
	if sessionID != "" {
		path += "?session=" + url.QueryEscape(sessionID)
	}
	err := c.Do(ctx, MethodGet, path, nil, &tl)
	return tl, err
}

func (c *Client) send(ctx context.Context, method, path string, body any, accept string) (*Response, error) {
	var data []byte
	ctype := ""
	switch b := body.(type) {
	case nil:
	case json.RawMessage:
		data, ctype = b, "application/json"
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		data, ctype = js, "application/json"
	}
	resp, err := c.roundTrip(ctx, method, path, data, ctype, accept)
	if err != nil {
		return nil, c.dialError(err)
	}
	return resp, nil
}

// dialError says how to fix a daemon that cannot be reached, and marks it ErrUnavailable.
func (c *Client) dialError(err error) error {
	var de *dialError
	if errors.As(err, &de) {
		// Most who read this installed the package, where make run means nothing.
		return fmt.Errorf("cannot reach sandboxd at %s (is it running? an admin starts it with `systemctl start sandboxd.socket`, or `make run` in the source tree; elsewhere: pass --socket or set SANDBOXD_SOCKET): %w: %w", c.socket, ErrUnavailable, err)
	}
	return fmt.Errorf("request to %s: %w", c.socket, err)
}

func statusError(status int, data []byte) error {
	var eb protocol.ErrorBody
	if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Class == "" {
		return &APIError{Status: status, Detail: protocol.ErrorDetail{Class: fmt.Sprintf("http_%d", status), Message: strings.TrimSpace(string(data))}}
	}
	return &APIError{Status: status, Detail: eb.Error}
}

// ctxOr is ctx's error when ctx ended (cancelling closes the connection, so the read that
// failed says only that), else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
