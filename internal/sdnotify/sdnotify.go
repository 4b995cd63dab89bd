package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Protocol states the daemon sends.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
)

// Notifier sends states to the service manager. The zero value (no $NOTIFY_SOCKET) sends
// nothing, so a daemon run by hand or in a test needs no special case.
type Notifier struct {
	addr *net.UnixAddr
}

// FromEnv reads $NOTIFY_SOCKET and removes it from the environment: the socket is the
// daemon's to speak on, never its children's (a confined call must not be able to tell
// systemd the service is ready or stopping).
func FromEnv() (*Notifier, error) {
	p := os.Getenv("NOTIFY_SOCKET")
	os.Unsetenv("NOTIFY_SOCKET")
	if p == "" {
		return &Notifier{}, nil
	}
	switch {
	case strings.HasPrefix(p, "@"):
		// An abstract socket: Go spells the leading NUL as '@' itself.
	case strings.HasPrefix(p, "/"):
	default:
		// vsock addresses (vsock:CID:PORT) are for VMs; sandboxd runs on the host.
		return &Notifier{}, fmt.Errorf("NOTIFY_SOCKET %q: only a unix socket path is supported", p)
	}
	return &Notifier{addr: &net.UnixAddr{Name: p, Net: "unixgram"}}, nil
}

// Enabled says whether a service manager listens.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Notify sends state (newline-separated KEY=VALUE assignments) in one datagram. It dials for
// each message: states are rare, and a fresh socket survives the manager re-executing
// itself (systemctl daemon-reexec), which a kept one may not.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("sd_notify dial: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", firstLine(state), err)
	}
	return nil
}

// Reloading is the state of a reload starting: RELOADING=1 with the CLOCK_MONOTONIC time in
// µs, which systemd (notify-reload, v253+) requires to match the reload to the request;
// send Ready when it is done.
func Reloading() string {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail on Linux with a valid pointer; a zero time is still a
	// well-formed message.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	usec := uint64(ts.Sec)*1e6 + uint64(ts.Nsec)/1e3
	return "RELOADING=1\nMONOTONIC_USEC=" + strconv.FormatUint(usec, 10)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
