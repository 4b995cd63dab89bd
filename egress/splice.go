package egress

import (
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// tcpProgress is the bytes a TCP connection has received plus those its peer acknowledged, from
// the kernel's TCP_INFO: it moves whenever data moves either way, even while splice(2) carries
// the data without our code seeing it. ok is false when the kernel does not say (before 4.2 the
// fields are absent and read as zero).
func tcpProgress(c *net.TCPConn) (uint64, bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return 0, false
	}
	p := info.Bytes_received + info.Bytes_acked
	return p, p > 0
}

// spliceable returns the TCP connections under a and b when the tunnel can run in the kernel:
// both TCP, and the kernel reporting progress so the idle watchdog can see traffic. The client
// side has always sent something by now (the CONNECT or the SOCKS request), so a zero means the
// counters are missing, not that nothing happened.
func spliceable(a, b net.Conn) (*net.TCPConn, *net.TCPConn, bool) {
	ta, ok1 := unwrap(a).(*net.TCPConn)
	tb, ok2 := unwrap(b).(*net.TCPConn)
	if !ok1 || !ok2 {
		return nil, nil, false
	}
	if _, ok := tcpProgress(ta); !ok {
		return nil, nil, false
	}
	return ta, tb, true
}

// pipeSplice is pipe for two TCP connections: each direction is one TCPConn.ReadFrom, which
// Linux serves with splice(2), so the bytes are not copied into this process and back
// (BenchmarkDownload200MB/connect vs connect-nosplice is the A/B). Deadlines cannot watch for
// idleness here (a write deadline firing mid-pump would lose what sits in the pipe), so a watchdog
// reads the kernel's byte counters every quarter of the idle time and ends the tunnel once
// nothing has moved for idle.
func pipeSplice(a, b *net.TCPConn, idle time.Duration) {
	// Deadlines left from the handshake would cut the stream; the watchdog replaces them.
	_ = a.SetDeadline(time.Time{})
	_ = b.SetDeadline(time.Time{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { watchIdle(stop, idle, a, b) })
	wg.Go(func() { spliceHalf(b, a) })
	spliceHalf(a, b)
	close(stop)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

func spliceHalf(dst, src *net.TCPConn) {
	_, err := dst.ReadFrom(src)
	if err == nil && dst.CloseWrite() == nil {
		return
	}
	_ = src.Close()
	_ = dst.Close()
}

// watchIdle closes a and b once their combined progress has not changed for idle, or returns
// when stop is closed. It stops the other direction's copy too, since pipeSplice waits for it.
func watchIdle(stop <-chan struct{}, idle time.Duration, a, b *net.TCPConn) {
	progress := func() uint64 {
		pa, _ := tcpProgress(a)
		pb, _ := tcpProgress(b)
		return pa + pb
	}
	t := time.NewTicker(max(idle/4, time.Millisecond))
	defer t.Stop()
	last, lastMove := progress(), time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			if p := progress(); p != last {
				last, lastMove = p, now
				continue
			}
			if now.Sub(lastMove) >= idle {
				_ = a.Close()
				_ = b.Close()
				return
			}
		}
	}
}
