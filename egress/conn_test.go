package egress

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"
	"time"
)

// takeBulkSlots holds every bulk copy buffer slot until tb ends, so streams keep their small
// buffers. Not for parallel tests: it starves every other stream of bulk buffers meanwhile. A
// stream still open (a kept-alive tunnel) holds its slot, so this waits for it, for a while.
func takeBulkSlots(tb testing.TB) {
	tb.Helper()
	taken := 0
	tb.Cleanup(func() {
		for range taken {
			<-bulkSlots
		}
	})
	timeout := time.After(10 * time.Second)
	for taken < maxBulkBufs {
		select {
		case bulkSlots <- struct{}{}:
			taken++
		case <-timeout:
			tb.Fatalf("%d bulk slots still held by open streams after 10 s", maxBulkBufs-taken)
		}
	}
}

// TestTunnelCarriesBulkIntact sends 24 MB through a tunnel both ways at once, with bulk
// buffers and with every bulk slot taken, and checks every byte arrives, and that each stream
// gave its slot back.
func TestTunnelCarriesBulkIntact(t *testing.T) {
	for _, smallOnly := range []bool{false, true} {
		name := map[bool]string{false: "bulk", true: "smallonly"}[smallOnly]
		t.Run(name, func(t *testing.T) {
			if smallOnly {
				takeBulkSlots(t)
			}
			testTunnelCarriesBulk(t)
			// The tunnel's goroutines give their buffers back after the client sees EOF.
			want := map[bool]int{false: 0, true: maxBulkBufs}[smallOnly]
			deadline := time.Now().Add(5 * time.Second)
			for len(bulkSlots) != want && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if n := len(bulkSlots); n != want {
				t.Errorf("%d bulk slots held after the tunnel ended, want %d", n, want)
			}
		})
	}
}

func testTunnelCarriesBulk(t *testing.T) {
	const size = 24 << 20
	payload := make([]byte, size)
	r := rand.NewChaCha8([32]byte{1})
	_, _ = r.Read(payload)
	want := sha256.Sum256(payload)
	// The origin echoes what it reads, so the same bytes cross the proxy both ways.
	origin := echoOnce(t, "")
	s := &Server{Decide: allowDecide, AllowPrivate: loopback}
	c, br := connectTunnel(t, startProxy(t, s), origin)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	go func() {
		_, _ = c.Write(payload)
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	h := sha256.New()
	n, err := io.Copy(h, br)
	if err != nil || n != size {
		t.Fatalf("echoed %d of %d bytes: %v", n, size, err)
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		t.Error("the echoed bytes differ from those sent")
	}
}

// TestCopyBufGrowsAndShrinks: a read that fills the small buffer moves a stream to a bulk one
// (taking a slot), a short read moves it back (giving the slot back), and with no slot free
// the stream stays small.
func TestCopyBufGrowsAndShrinks(t *testing.T) {
	held := len(bulkSlots)
	b := newCopyBuf()
	defer b.release()
	step := func(n int, wantBulk bool) {
		t.Helper()
		b.filled(n)
		if b.bulk != wantBulk || len(b.bytes()) != map[bool]int{false: smallBufSize, true: bulkBufSize}[wantBulk] {
			t.Fatalf("after a read of %d: bulk %v with %d bytes, want bulk %v", n, b.bulk, len(b.bytes()), wantBulk)
		}
		if want := held + map[bool]int{false: 0, true: 1}[wantBulk]; len(bulkSlots) != want {
			t.Fatalf("after a read of %d: %d slots held, want %d", n, len(bulkSlots), want)
		}
	}
	step(smallBufSize-1, false)
	step(smallBufSize, true)
	step(bulkBufSize, true)
	step(smallBufSize, true)
	step(100, false)
	takeBulkSlots(t)
	held = maxBulkBufs
	step(smallBufSize, false)
}

// TestIdleConnWriteToSlowReader: a large write to a peer that keeps reading, only slower than
// the idle time per write, completes; one to a peer that stops reading fails once nothing has
// moved for the idle time.
func TestIdleConnWriteToSlowReader(t *testing.T) {
	t.Parallel()
	// Wide enough that a loaded machine (the race detector, packages in parallel) does not stall
	// the reader for a whole idle time between its reads.
	const idle = 250 * time.Millisecond
	a, b := net.Pipe() // unbuffered: a write returns only as the reader takes the bytes
	defer a.Close()
	defer b.Close()
	w := newIdleConn(a, idle, nil)
	go func() {
		buf := make([]byte, 16<<10)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	p := make([]byte, 1<<20) // 64 reads of 16 KiB, 10 ms apart: 640 ms, past twice the idle time
	start := time.Now()
	if n, err := w.Write(p); n != len(p) || err != nil {
		t.Fatalf("write to a slow reader: %d of %d after %v: %v", n, len(p), time.Since(start), err)
	}
	if took := time.Since(start); took < 2*idle {
		t.Fatalf("the write took %v, not past the idle time: the test shows nothing", took)
	}

	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()
	w = newIdleConn(c, idle, nil)
	start = time.Now()
	n, err := w.Write(p)
	if n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write to a reader that never reads: %d, %v", n, err)
	}
	if took := time.Since(start); took > 20*idle {
		t.Errorf("a stalled write ended after %v, idle is %v", took, idle)
	}
}
