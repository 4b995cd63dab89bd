package config

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// Metrics configures the optional Prometheus listener. Admins can always read the same
// metrics at GET /v1/metrics over the daemon's socket; this listener is for a scraper that
// cannot speak to a Unix socket with peer credentials.
type Metrics struct {
	// Listen is "127.0.0.1:PORT" (or another host:port) or "unix:/absolute/path"; empty (the
	// default) serves no listener.
	Listen string `json:"listen"`
	// AllowRemote lets Listen name a non-loopback address. Off by default: the metrics name
	// every tool's call counts and the daemon's load, which a host's other tenants or the
	// network should not read.
	AllowRemote bool `json:"allow_remote"`
}

// MetricsUnixPrefix marks metrics.listen as a Unix socket path.
const MetricsUnixPrefix = "unix:"

// CheckListen says what is wrong with m.Listen, or nil: an absolute socket path, or a
// host:port whose host is a loopback IP (or localhost) unless AllowRemote.
func (m Metrics) CheckListen() error {
	if m.Listen == "" {
		return nil
	}
	if p, ok := strings.CutPrefix(m.Listen, MetricsUnixPrefix); ok {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("metrics.listen %q: a unix: socket needs a clean absolute path", m.Listen)
		}
		return nil
	}
	host, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		return fmt.Errorf("metrics.listen %q: want host:port or unix:/path: %w", m.Listen, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("metrics.listen %q: port must be 0..65535 (0: the kernel picks one)", m.Listen)
	}
	if m.AllowRemote {
		return nil
	}
	// An empty host (":9100") binds every interface; a name other than localhost could
	// resolve anywhere. Both are refused rather than trusted.
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("metrics.listen %q is not a loopback address; set metrics.allow_remote: true to expose per-tool counts beyond this host", m.Listen)
	}
	return nil
}
