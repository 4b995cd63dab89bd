package daemon

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	"golang.org/x/net/netutil"

	"github.com/sandboxd/sandboxd/config"
)

// maxMetricsConns bounds the metrics listener's open connections: a scraper or two, with room.
const maxMetricsConns = 16

// scrapeEvery is how often the listener gathers the metrics at most: a scraper wants them every
// few seconds, and any local user may ask in a loop, which would spend the root daemon's CPU
// (about half a millisecond a gather) that every user's calls need.
const scrapeEvery = time.Second

// cachedGatherer gathers g at most once every scrapeEvery and answers from that gather between.
type cachedGatherer struct {
	g   prometheus.Gatherer
	mu  sync.Mutex
	at  time.Time
	mfs []*dto.MetricFamily
	err error
}

func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= scrapeEvery {
		c.mfs, c.err = c.g.Gather()
		c.at = time.Now()
	}
	return c.mfs, c.err
}

// metricsEndpoint is the optional Prometheus listener (metrics.listen). The daemon owns its
// one goroutine: start launches it, stop shuts the server and waits for it.
type metricsEndpoint struct {
	l      net.Listener
	server *http.Server
	log    *zap.Logger
	// unixPath is removed on stop; empty for TCP.
	unixPath string
	started  bool
	done     chan struct{}
}

// listenMetrics binds metrics.listen, or returns nil when it is empty. Binding here, at
// start, makes a taken port or a bad path fail the start rather than a later scrape.
func listenMetrics(m config.Metrics, adminGroup string, reg *prometheus.Registry, log *zap.Logger) (*metricsEndpoint, error) {
	if m.Listen == "" {
		return nil, nil
	}
	// Config.Validate checked it already; checked again because this is the last point
	// before a socket exists, and a non-loopback one must never be opened by mistake.
	if err := m.CheckListen(); err != nil {
		return nil, err
	}
	e := &metricsEndpoint{log: log.Named("metrics"), done: make(chan struct{})}
	var err error
	if p, ok := strings.CutPrefix(m.Listen, config.MetricsUnixPrefix); ok {
		e.l, err = listenMetricsUnix(p, adminGroup)
		e.unixPath = p
	} else {
		e.l, err = listenMetricsTCP(m)
	}
	if err != nil {
		return nil, err
	}
	// Any local user can connect to a loopback port: without a bound, connections held open
	// would each keep one of the daemon's file descriptors, which every user's calls and the
	// audit log need. Past the bound a connection waits in the kernel's backlog, holding none;
	// an idle one is closed soon. What one user can then deny is the scrape, not the daemon.
	e.l = netutil.LimitListener(e.l, maxMetricsConns)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(&cachedGatherer{g: reg}, promhttp.HandlerOpts{
		ErrorLog: zap.NewStdLog(e.log),
		// A scrape gathers every collector; a few at once is plenty and bounds the cost of
		// a client that scrapes in a loop.
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "sandboxd serves only GET /metrics here", http.StatusNotFound)
	})
	e.server = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(e.log),
	}
	return e, nil
}

func listenMetricsTCP(m config.Metrics) (net.Listener, error) {
	l, err := net.Listen("tcp", m.Listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listener %s: %w", m.Listen, err)
	}
	// "localhost" is resolved by the resolver (/etc/hosts): check what was actually bound.
	if ta, ok := l.Addr().(*net.TCPAddr); !m.AllowRemote && (!ok || !ta.IP.IsLoopback()) {
		l.Close()
		return nil, fmt.Errorf("metrics listener %s bound %s, which is not loopback; set metrics.allow_remote: true to allow it", m.Listen, l.Addr())
	}
	return l, nil
}

// listenMetricsUnix binds path with mode 0660, group adminGroup (root only if the group does
// not exist). The socket is bound under a temporary name and renamed into place once its
// mode and group are set, so the path never serves it with wider access (the unit's
// UMask=0077 closes the temporary name's window too).
func listenMetricsUnix(path, adminGroup string) (net.Listener, error) {
	// As root the daemon removes, chmods and renames by path here: a directory another user
	// can change would let them point those at a file of their choosing (Listen's check).
	dir := filepath.Dir(path)
	if err := checkTrustedDir(dir, true, true); err != nil {
		return nil, fmt.Errorf("metrics socket directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("metrics socket directory: %w", err)
	}
	if err := checkTrustedDir(dir, true, false); err != nil {
		return nil, fmt.Errorf("metrics socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	_ = os.Remove(tmp) // a leftover of this pid's predecessor: nobody listens on it
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("metrics listener unix:%s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	// Close must not unlink the temporary name (gone) nor anything at it later; stop removes
	// the real path.
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		l.Close()
		_ = os.Remove(tmp)
		return nil, err
	}
	// Readable by the admin group when it exists and the socket could be given to it; by
	// root (the owner) alone otherwise: a failure narrows access, never widens it.
	mode := os.FileMode(0o600)
	if g, err := user.LookupGroup(adminGroup); err == nil {
		if gid, err := strconv.Atoi(g.Gid); err == nil && gid != 0 && os.Lchown(tmp, -1, gid) == nil {
			mode = 0o660
		}
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fail(fmt.Errorf("chmod metrics socket: %w", err))
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(fmt.Errorf("move metrics socket into place: %w", err))
	}
	return l, nil
}

// removeStaleSocket removes a socket file at path that nobody answers on; anything else
// there is refused (a live daemon's socket, a regular file).
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("metrics socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("metrics socket %s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("metrics socket %s is held by a running process", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("probe metrics socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale metrics socket %s: %w", path, err)
	}
	return nil
}

// Addr is the bound address (the port chosen for ":0" in tests).
func (e *metricsEndpoint) Addr() net.Addr { return e.l.Addr() }

func (e *metricsEndpoint) start() {
	e.started = true
	go func() {
		defer close(e.done)
		if err := e.server.Serve(e.l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("metrics listener stopped", zap.Error(err))
		}
	}()
	e.log.Info("serving metrics", zap.String("addr", e.l.Addr().String()))
}

// stop closes the listener and its connections (a scrape in flight is cut: it is cheap to
// repeat) and waits for the serving goroutine. Safe to call when start never ran.
func (e *metricsEndpoint) stop() {
	e.server.Close()
	e.l.Close()
	if e.started {
		<-e.done
	}
	if e.unixPath != "" {
		_ = os.Remove(e.unixPath)
	}
}
