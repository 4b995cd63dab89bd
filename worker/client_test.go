package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// fakeWorker is a Client whose worker end this test plays: answer gets each request the
// client sends and returns the raw bytes to send back (any frames, or garbage); the fake then
// closes its end, so a request nothing answered fails at once rather than hanging.
func fakeWorker(t testing.TB, answer func(id uint64, req []byte) []byte) *Client {
	t.Helper()
	daemon, child, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(daemon)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer child.Close()
		id, h, _, err := readFrame(bufio.NewReader(child))
		if err != nil {
			return
		}
		_, _ = child.Write(answer(id, h))
	}()
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	return c
}

// rawFrame is one frame as the wire carries it, header bytes as given.
func rawFrame(id uint64, header, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(8+4+len(header)+len(payload)))
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	return append(append(b, header...), payload...)
}

// call runs one request of op's kind and reports whether it returned a reply (and which
// error otherwise): a method that returns no error must return its reply.
func call(c *Client, op string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ok bool
	var err error
	switch op {
	case OpRead:
		var r *ReadReply
		r, _, err = c.Read(ctx, ReadArgs{Path: "/x", Kind: KindText})
		ok = r != nil
	case OpWrite:
		var r *WriteReply
		r, err = c.Write(ctx, "/x", []byte("y"), nil)
		ok = r != nil
	case OpEdit:
		var r *WriteReply
		r, err = c.Edit(ctx, EditArgs{Path: "/x", Edits: []Edit{{OldString: "a", NewString: "b"}}})
		ok = r != nil
	case OpGlob:
		var r *GlobReply
		r, err = c.Glob(ctx, GlobArgs{Pattern: "*", Root: "/"})
		ok = r != nil
	case OpGrep:
		var r *GrepReply
		r, _, err = c.Grep(ctx, GrepArgs{Args: []string{"x"}, Dir: "/"})
		ok = r != nil
	case OpResolve:
		var r *Resolved
		r, err = c.ResolveInfo(ctx, "/x")
		ok = r != nil
	default:
		_, err = c.ReadFile(ctx, "/x", 10)
		ok = true
	}
	if ctx.Err() != nil {
		return false, errNoReturn
	}
	return ok, err
}

// errNoReturn is call's answer when the request was still waiting at its deadline.
var errNoReturn = errors.New("the call did not return")

var answeredOps = []string{OpRead, OpWrite, OpEdit, OpGlob, OpGrep, OpResolve}

// A worker that answers a request without the reply its op needs (an empty header, or
// another op's reply) is broken: the call fails and the daemon never gets a nil reply to
// dereference.
func TestClientRefusesAnswerWithoutReply(t *testing.T) {
	wrong := map[string]string{
		OpRead: `{"glob":{"paths":[]}}`, OpWrite: `{"read":{"path":"/x"}}`, OpEdit: `{}`,
		OpGlob: `{"resolve":{"resolved":"/x"}}`, OpGrep: `{}`, OpResolve: `{"write":{"path":"/x"}}`,
	}
	for _, op := range answeredOps {
		t.Run(op, func(t *testing.T) {
			c := fakeWorker(t, func(id uint64, _ []byte) []byte { return rawFrame(id, []byte(wrong[op]), nil) })
			ok, err := call(c, op)
			if err == nil || ok {
				t.Fatalf("%s answered with %s: reply %v, err %v; want an error", op, wrong[op], ok, err)
			}
			select {
			case <-c.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the client kept a worker that answered out of protocol")
			}
		})
	}
}

// A frame length near 2³² must be refused as too large, not wrapped past the bound into a
// 4 GiB allocation.
func TestReadFrameRefusesWrappingLength(t *testing.T) {
	for _, n := range []uint32{0xffffffff, 0xfffffffd, 0xfffffffc, MaxFrameBytes - 3} {
		b := binary.BigEndian.AppendUint32(nil, n)
		b = binary.BigEndian.AppendUint64(b, 1)
		b = binary.BigEndian.AppendUint32(b, 0)
		_, _, _, err := readFrame(bufio.NewReader(bytes.NewReader(b)))
		if !errors.Is(err, ErrFrameTooLarge) {
			t.Errorf("length %#x: err %v, want ErrFrameTooLarge", n, err)
		}
	}
}

// FuzzClientFrames feeds the daemon's side of the worker protocol whatever a broken or
// compromised worker could send back to a request: the call returns (never hangs), never
// panics, and never returns no error without its reply.
func FuzzClientFrames(f *testing.F) {
	f.Add(byte(0), []byte(`{"read":{"path":"/x","lines":1}}`), []byte("1\tx\n"), []byte{})
	f.Add(byte(1), []byte(`{"write":{"path":"/x"}}`), []byte{}, []byte{})
	f.Add(byte(3), []byte(`{"err":{"code":"not_found","msg":"no"}}`), []byte{}, []byte{0, 0, 0, 1})
	f.Add(byte(5), []byte(`{"resolve":null}`), []byte{}, []byte("\xff\xff\xff\xff"))
	f.Add(byte(6), []byte(`{"file":{"path":"/x"}}`), []byte("settings"), []byte{})
	f.Add(byte(0), []byte(`{}`), []byte{}, []byte("\xff\xff\xff\xfd\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, which byte, header, payload, tail []byte) {
		ops := append(answeredOps, OpReadFile)
		op := ops[int(which)%len(ops)]
		c := fakeWorker(t, func(id uint64, _ []byte) []byte {
			// A frame for the request with the fuzzed header, then raw bytes (another frame,
			// a lying length, garbage).
			return append(rawFrame(id, header, payload), tail...)
		})
		ok, err := call(c, op)
		if err == nil && !ok {
			t.Fatalf("%s: no error and no reply for header %q", op, header)
		}
		if errors.Is(err, errNoReturn) {
			t.Fatalf("%s: %v", op, err)
		}
	})
}

// TestClientWriteToStalledWorkerEnds: a worker that stops reading (its owner stopped it) fills
// the socket; a request whose write cannot finish ends with its context, closing the
// connection, and so does one waiting for that write, rather than block a caller (a session's
// lock, a reload) for good.
func TestClientWriteToStalledWorkerEnds(t *testing.T) {
	daemon, child, err := Socketpair()
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close() // never read: the worker is stopped
	c, err := NewClient(daemon)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := bytes.Repeat([]byte("A"), 8<<20)
	done := make(chan error, 2)
	for range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_, err := c.WriteDecided(ctx, WriteArgs{Path: "/x"}, big)
			done <- err
		}()
	}
	for range 2 {
		select {
		case err := <-done:
			if err == nil {
				t.Error("a write to a worker that reads nothing succeeded")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write to a stalled worker outlived its context")
		}
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Error("the connection to a stalled worker was kept")
	}
}
