package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/unixhttp"
)

// client talks HTTP over the daemon's Unix socket.
type client struct {
	socket string
	http   *http.Client
}

func newClient(socket string) *client {
	return &client{socket: socket, http: &http.Client{Transport: unixhttp.New(socket, 4)}}
}

// apiError is an error response of the daemon.
type apiError struct {
	Status int
	Detail api.ErrorDetail
}

func (e *apiError) Error() string {
	msg := e.Detail.Message
	if len(e.Detail.Suggestions) > 0 && !strings.Contains(msg, "did you mean") {
		msg += " (did you mean " + strings.Join(e.Detail.Suggestions, ", ") + "?)"
	}
	return fmt.Sprintf("%s [%s]", msg, e.Detail.Class)
}

// do sends a request and decodes a 2xx body into out. Call results come back with their
// own error field, so they are decoded whatever the status when out is a *api.CallResult.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sandboxd"+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return c.dialError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("read response: %w", err)
	}
	if cr, ok := out.(*api.CallResult); ok && len(data) > 0 && resp.StatusCode != http.StatusNotFound {
		if err := json.Unmarshal(data, cr); err == nil && cr.Tool != "" {
			return nil
		}
	}
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		if err := json.Unmarshal(data, &eb); err != nil || eb.Error.Class == "" {
			return &apiError{Status: resp.StatusCode, Detail: api.ErrorDetail{Class: "http_" + fmt.Sprint(resp.StatusCode), Message: strings.TrimSpace(string(data))}}
		}
		return &apiError{Status: resp.StatusCode, Detail: eb.Error}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// stream sends a call asking for NDJSON and hands each event to onEvent; it returns the result.
func (c *client) stream(ctx context.Context, path string, body any, onEvent func(api.StreamLine)) (*api.CallResult, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandboxd"+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.dialError(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var eb api.ErrorBody
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(data, &eb) == nil && eb.Error.Class != "" {
			return nil, &apiError{Status: resp.StatusCode, Detail: eb.Error}
		}
		return nil, fmt.Errorf("daemon answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 256<<20)
	for sc.Scan() {
		var line api.StreamLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return nil, fmt.Errorf("bad stream line: %w", err)
		}
		if line.Result != nil {
			return line.Result, nil
		}
		onEvent(line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the daemon closed the stream before the result")
}

func (c *client) dialError(err error) error {
	var ne *net.OpError
	if errors.As(err, &ne) && ne.Op == "dial" {
		return fmt.Errorf("cannot reach sandboxd at %s (is it running? start it with `make run` or pass --socket): %w", c.socket, err)
	}
	return err
}
