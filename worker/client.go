package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Socketpair returns the daemon's end and the worker's end of a new stream socketpair. The
// worker's end goes to the child as fd 3 (Spec.ExtraFiles[0]); close it in the daemon after
// the start.
func Socketpair() (daemon, child *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "worker-daemon"), os.NewFile(uintptr(fds[1]), "worker-child"), nil
}

// Client is the daemon's side of one worker. It is safe for concurrent use; requests are
// multiplexed over one socket.
type Client struct {
	conn net.Conn

	// wsem is the right to write a frame (a mutex a waiter can give up on): a worker that
	// stops reading (its owner stopped it) fills the socket, and a write then blocks.
	wsem chan struct{}
	w    *bufio.Writer

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan reply
	err     error // set once the connection is gone

	done chan struct{}
}

type reply struct {
	resp    *Response
	payload []byte
	err     error
}

// NewClient takes over f (the daemon's end from Socketpair) and starts reading answers.
func NewClient(f *os.File) (*Client, error) {
	conn, err := net.FileConn(f)
	f.Close() // FileConn dups the fd
	if err != nil {
		return nil, fmt.Errorf("worker connection: %w", err)
	}
	c := &Client{
		conn:    conn,
		w:       bufio.NewWriterSize(conn, 64<<10),
		wsem:    make(chan struct{}, 1),
		pending: map[uint64]chan reply{},
		done:    make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

// Done is closed when the connection to the worker is gone (it exited or Close was called).
func (c *Client) Done() <-chan struct{} { return c.done }

// Close shuts the connection; the worker exits on EOF. Requests in flight fail with ErrGone.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

func (c *Client) readLoop() {
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var err error
	for {
		var id uint64
		var h, payload []byte
		id, h, payload, err = readFrame(r)
		if err != nil {
			break
		}
		resp := &Response{}
		if jerr := json.Unmarshal(h, resp); jerr != nil {
			err = fmt.Errorf("decode worker answer: %w", jerr)
			break
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- reply{resp: resp, payload: payload}
		}
	}
	c.conn.Close()
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", ErrGone, err)
	for id, ch := range c.pending {
		ch <- reply{err: errcode.New(errcode.Unavailable, c.err)}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
}

// do sends req with payload and waits for the answer. When ctx ends first the worker is
// told to cancel the request (rg is killed) and ctx's error returned.
func (c *Client) do(ctx context.Context, req *Request, payload []byte) (*Response, []byte, error) {
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, nil, errcode.New(errcode.Unavailable, err)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.send(ctx, id, req, payload); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		if err == ErrFrameTooLarge {
			return nil, nil, errcode.New(errcode.TooLarge, fmt.Errorf("request larger than %d MiB; split it into smaller writes", MaxFrameBytes>>20))
		}
		return nil, nil, errcode.New(errcode.Unavailable, fmt.Errorf("%w: %v", ErrGone, err))
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, nil, r.err
		}
		if r.resp.Err != nil {
			return nil, nil, r.resp.Err.err()
		}
		if !answers(req.Op, r.resp) {
			// Another request's answer, or none: the worker no longer speaks the protocol, so
			// nothing more it sends is taken (its requests in flight fail with ErrGone).
			c.conn.Close()
			return nil, nil, errcode.New(errcode.Internal, fmt.Errorf("%w: its answer to a %s request carried no %s reply", ErrBroken, req.Op, req.Op))
		}
		return r.resp, r.payload, nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		cctx, cancel := context.WithTimeout(context.Background(), cancelSendTimeout)
		_ = c.send(cctx, 0, &Request{Op: OpCancel, CancelID: id}, nil)
		cancel()
		return nil, nil, ctx.Err()
	}
}

// answers reports whether r carries the reply an op needs; ops answered by the payload alone
// (readfile, markdown) need none.
func answers(op string, r *Response) bool {
	switch op {
	case OpRead:
		return r.Read != nil
	case OpWrite, OpEdit:
		return r.Write != nil
	case OpGlob:
		return r.Glob != nil
	case OpGrep:
		return r.Grep != nil
	case OpResolve:
		return r.Resolve != nil
	}
	return true
}

// cancelSendTimeout bounds the write of a cancel request, which follows a deadline passed.
const cancelSendTimeout = time.Second

// send writes one frame, within ctx: a write the worker does not take before ctx ends (it
// stopped reading, and the socket is full) closes the connection, as does waiting that long
// for another request's write. Such a worker is of no more use, and its owner's requests must
// not hold the daemon (a session's lock, a reload waiting on it) for as long as they like.
func (c *Client) send(ctx context.Context, id uint64, req *Request, payload []byte) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		c.conn.Close()
		return ctx.Err()
	}
	defer func() { <-c.wsem }()
	defer context.AfterFunc(ctx, func() { c.conn.Close() })()
	if err := writeFrame(c.w, id, req, payload); err != nil {
		if err != ErrFrameTooLarge {
			c.conn.Close()
		}
		return err
	}
	return c.w.Flush()
}

// Read reads part of a file as the owner: text lines (cat -n formatted), image or raw bytes,
// or PDF text. The payload is the content.
func (c *Client) Read(ctx context.Context, args ReadArgs) (*ReadReply, []byte, error) {
	resp, payload, err := c.do(ctx, &Request{Op: OpRead, Read: &args}, nil)
	if err != nil {
		return nil, nil, err
	}
	return resp.Read, payload, nil
}

// Write replaces path with content atomically, as the owner.
func (c *Client) Write(ctx context.Context, path string, content []byte, expect *Expect) (*WriteReply, error) {
	return c.WriteDecided(ctx, WriteArgs{Path: path, Expect: expect}, content)
}

// WriteDecided is Write with the place the policy decided the path leads (WriteArgs.Decided).
func (c *Client) WriteDecided(ctx context.Context, a WriteArgs, content []byte) (*WriteReply, error) {
	resp, _, err := c.do(ctx, &Request{Op: OpWrite, Write: &a}, content)
	if err != nil {
		return nil, err
	}
	return resp.Write, nil
}

// Edit applies edits to path atomically (all or nothing), as the owner.
func (c *Client) Edit(ctx context.Context, args EditArgs) (*WriteReply, error) {
	resp, _, err := c.do(ctx, &Request{Op: OpEdit, Edit: &args}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Write, nil
}

// Glob lists files matching a pattern, newest first.
func (c *Client) Glob(ctx context.Context, args GlobArgs) (*GlobReply, error) {
	resp, _, err := c.do(ctx, &Request{Op: OpGlob, Glob: &args}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Glob, nil
}

// Grep runs rg inside the worker's confinement and returns a page of its output lines.
func (c *Client) Grep(ctx context.Context, args GrepArgs) (*GrepReply, []byte, error) {
	resp, payload, err := c.do(ctx, &Request{Op: OpGrep, Grep: &args}, nil)
	if err != nil {
		return nil, nil, err
	}
	return resp.Grep, payload, nil
}

// Resolve resolves path as the owner (symlinks, `..`, `//`): for a path that does not exist,
// its deepest existing parent resolved plus the rest. special is "device", "fifo", "socket"
// or "proc" for paths never to be read.
func (c *Client) Resolve(ctx context.Context, path string) (resolved, special string, err error) {
	r, err := c.ResolveInfo(ctx, path)
	if err != nil {
		return "", "", err
	}
	return r.Resolved, r.Special, nil
}

// ResolveInfo is Resolve with whether the path exists and is a directory.
func (c *Client) ResolveInfo(ctx context.Context, path string) (*Resolved, error) {
	resp, _, err := c.do(ctx, &Request{Op: OpResolve, Path: path}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Resolve, nil
}

// ResolveRead is ResolveInfo for a Read: a missing name falls back to an existing Unicode or
// spacing variant of it (Resolved.Variant), and an existing file's device and inode are
// reported. Pass the answer as ReadArgs.Decided once the policy has decided on it.
func (c *Client) ResolveRead(ctx context.Context, path string) (*Resolved, error) {
	resp, _, err := c.do(ctx, &Request{Op: OpResolve, Path: path, Fallback: true}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Resolve, nil
}

// Markdown converts a page's HTML to Markdown in the worker (domain: the page's
// scheme://host, for its relative links).
func (c *Client) Markdown(ctx context.Context, html []byte, domain string) (string, error) {
	_, payload, err := c.do(ctx, &Request{Op: OpMarkdown, Domain: domain}, html)
	return string(payload), err
}

// ReadFile reads at most maxBytes of a regular file as the owner (settings files). A longer
// file is an error, so a truncated settings file is never parsed.
func (c *Client) ReadFile(ctx context.Context, path string, maxBytes int64) ([]byte, error) {
	_, payload, err := c.ReadFileInfo(ctx, path, maxBytes)
	return payload, err
}

// ReadFileInfo is ReadFile with what the worker saw of the file (its owner, mode, size).
func (c *Client) ReadFileInfo(ctx context.Context, path string, maxBytes int64) (*FileInfo, []byte, error) {
	resp, payload, err := c.do(ctx, &Request{Op: OpReadFile, Path: path, MaxBytes: maxBytes}, nil)
	if err != nil {
		return nil, nil, err
	}
	if resp.FileInfo == nil {
		return nil, nil, errors.New("worker: read_file answered without the file's info")
	}
	return resp.FileInfo, payload, nil
}
