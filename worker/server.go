package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Arg is the hidden first argument that makes the daemon binary (or a test binary) run as a
// worker: Spec{Path: "/proc/self/exe", Args: []string{worker.Arg}}.
const Arg = "sandboxd-worker"

// IsWorker reports whether this process was started as a worker. main and the TestMain of
// every test binary that starts workers call it first and hand over to Main.
func IsWorker() bool { return len(os.Args) > 1 && os.Args[1] == Arg }

// Main serves requests on fd 3 until the daemon closes it, then exits. It runs as the session
// owner inside the session's confinement; it never returns.
func Main() {
	f := os.NewFile(3, "worker")
	if f == nil {
		fmt.Fprintln(os.Stderr, "sandboxd-worker: fd 3 is not open")
		os.Exit(2)
	}
	conn, err := net.FileConn(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-worker:", err)
		os.Exit(2)
	}
	f.Close()
	Serve(conn)
	os.Exit(0)
}

// Serve answers requests on conn until it reaches EOF. Main uses it; tests may run it in
// process to measure the protocol alone.
func Serve(conn io.ReadWriteCloser) {
	s := &server{w: bufio.NewWriterSize(conn, 64<<10), cancels: map[uint64]context.CancelFunc{}}
	r := bufio.NewReaderSize(conn, 64<<10)
	var wg sync.WaitGroup
	for {
		id, h, payload, err := readFrame(r)
		if err != nil {
			break
		}
		req := &Request{}
		if err := json.Unmarshal(h, req); err != nil {
			s.answer(id, &Response{Err: wireError(errcode.New(errcode.BadRequest, fmt.Errorf("decode request: %w", err)))}, nil)
			continue
		}
		if req.Op == OpCancel {
			s.mu.Lock()
			if cancel := s.cancels[req.CancelID]; cancel != nil {
				cancel()
			}
			s.mu.Unlock()
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.mu.Lock()
		s.cancels[id] = cancel
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, out := handle(ctx, req, payload)
			s.mu.Lock()
			delete(s.cancels, id)
			s.mu.Unlock()
			cancel()
			s.answer(id, resp, out)
		}()
	}
	s.mu.Lock()
	for _, cancel := range s.cancels {
		cancel()
	}
	s.mu.Unlock()
	wg.Wait()
	conn.Close()
}

type server struct {
	wmu sync.Mutex
	w   *bufio.Writer

	mu      sync.Mutex
	cancels map[uint64]context.CancelFunc
}

func (s *server) answer(id uint64, resp *Response, payload []byte) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := writeFrame(s.w, id, resp, payload)
	if err == ErrFrameTooLarge {
		err = writeFrame(s.w, id, &Response{Err: wireError(errcode.Msg(errcode.TooLarge, "the answer is too large; ask for less (offset/limit, head_limit)"))}, nil)
	}
	if err == nil {
		_ = s.w.Flush()
	}
}

// handle runs one request. Panics become errors so one bad file cannot kill the session's
// worker and fail every request in flight.
func handle(ctx context.Context, req *Request, payload []byte) (resp *Response, out []byte) {
	defer func() {
		if p := recover(); p != nil {
			resp, out = &Response{Err: wireError(errcode.New(errcode.Internal, fmt.Errorf("worker panic in %s: %v", req.Op, p)))}, nil
		}
	}()
	var err error
	resp = &Response{}
	switch req.Op {
	case OpRead:
		if req.Read == nil {
			break
		}
		resp.Read, out, err = doRead(ctx, req.Read)
	case OpWrite:
		if req.Write == nil {
			break
		}
		resp.Write, err = doWrite(ctx, req.Write, payload)
	case OpEdit:
		if req.Edit == nil {
			break
		}
		resp.Write, err = doEdit(ctx, req.Edit)
	case OpGlob:
		if req.Glob == nil {
			break
		}
		resp.Glob, err = searchBounded(ctx, "Glob", func(ctx context.Context) (*GlobReply, error) { return doGlob(ctx, req.Glob) })
	case OpGrep:
		if req.Grep == nil {
			break
		}
		resp.Grep, err = searchBounded(ctx, "Grep", func(ctx context.Context) (r *GrepReply, err error) {
			r, out, err = doGrep(ctx, req.Grep)
			return r, err
		})
	case OpResolve:
		resp.Resolve, err = doResolve(req.Path, req.Fallback)
	case OpReadFile:
		resp.FileInfo, out, err = doReadFile(ctx, req.Path, req.MaxBytes)
	case OpMarkdown:
		resp.Markdown, out, err = doMarkdown(payload, req.Domain)
	default:
		err = errcode.Msg(errcode.BadRequest, "unknown worker op "+req.Op)
	}
	if err == nil && resp.Read == nil && resp.Write == nil && resp.Glob == nil && resp.Grep == nil &&
		resp.Resolve == nil && resp.FileInfo == nil && resp.Markdown == nil {
		err = errcode.Msg(errcode.BadRequest, "worker op "+req.Op+" without arguments")
	}
	if err != nil {
		return &Response{Err: wireError(err)}, nil
	}
	return resp, out
}
