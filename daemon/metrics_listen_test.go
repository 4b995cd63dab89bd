package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/config"
)

// scrape reads the metrics listener with Prometheus' own text parser: what a real scraper
// sees, not a regexp over it.
func scrape(t *testing.T, c *http.Client, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return fams
}

// value sums the samples of name whose labels include want (counter, gauge, or a
// histogram's count).
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// A few real calls move the counters a scraper of metrics.listen sees: calls by tool and
// behavior, decision and execution latency, an OOM kill, pending approvals, sessions, the
// audit's waits and queue.
func TestMetricsListener(t *testing.T) {
	td := startDaemon(t, "metrics:\n  listen: 127.0.0.1:0\nsandbox:\n  memory_max_bytes: 67108864\n")
	if td.d.metrics == nil {
		t.Fatal("metrics.listen set but no listener")
	}
	url := "http://" + td.d.metrics.Addr().String() + "/metrics"
	c := &http.Client{Timeout: 10 * time.Second}
	before := scrape(t, c, url)

	dir := t.TempDir()
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	for range 2 {
		if code, res := td.call(t, s.ID, "Bash", `{"command":"/bin/true"}`); code != 200 || res.IsError {
			t.Fatalf("bash: %d %+v", code, res)
		}
	}
	// The string doubles until the cgroup's memory.max kills awk.
	if code, res := td.call(t, s.ID, "Bash", `{"command":"awk 'BEGIN{s=\"x\"; while (1) s = s s}'"}`); code != 200 || res.Data["oom_killed"] != true {
		t.Fatalf("memory bomb: %d %+v", code, res)
	}
	ask := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	if code, res := td.call(t, ask.ID, "Bash", `{"command":"touch made"}`); code != 200 || res.ApprovalID == "" {
		t.Fatalf("ask: %d %+v", code, res)
	}

	time.Sleep(scrapeEvery) // the listener answers from one gather a second
	after := scrape(t, c, url)
	moved := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"sandboxd_calls_total", map[string]string{"tool": "Bash", "behavior": "allow"}, 3},
		{"sandboxd_calls_total", map[string]string{"tool": "Bash", "behavior": "ask"}, 1},
		{"sandboxd_decision_seconds", nil, 4},
		{"sandboxd_execution_seconds", nil, 3},
		{"sandboxd_kills_total", map[string]string{"reason": "oom"}, 1},
		{"sandboxd_audit_wait_seconds", nil, 4},
	}
	for _, m := range moved {
		b, a := max(value(before, m.name, m.labels), 0), value(after, m.name, m.labels)
		if a-b < m.min {
			t.Errorf("%s%v moved by %v (from %v to %v), want at least %v", m.name, m.labels, a-b, b, a, m.min)
		}
	}
	gauges := []struct {
		name string
		want float64
	}{
		{"sandboxd_sessions", 2},
		{"sandboxd_approvals_pending", 1},
		{"sandboxd_audit_healthy", 1},
	}
	for _, g := range gauges {
		if got := value(after, g.name, nil); got != g.want {
			t.Errorf("%s = %v, want %v", g.name, got, g.want)
		}
	}
	for _, name := range []string{"sandboxd_audit_queue_depth", "sandboxd_requests_total", "go_goroutines"} {
		if _, ok := after[name]; !ok {
			t.Errorf("%s missing from the scrape", name)
		}
	}
	// Only /metrics is served there: not the API.
	resp, err := c.Get("http://" + td.d.metrics.Addr().String() + "/v1/sessions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/sessions on the metrics listener: %s, want 404", resp.Status)
	}
	// /v1/metrics stays on the socket for admins.
	if code, b := td.do(t, "GET", "/v1/metrics", ""); code != 200 || !strings.Contains(string(b), "sandboxd_kills_total") {
		t.Errorf("/v1/metrics: %d", code)
	}
	td.stop()
	if _, err := c.Get(url); err == nil {
		t.Error("metrics listener still answers after the daemon stopped")
	}
}

// TestMetricsListenerBoundsConnections: any local user can connect to the loopback listener;
// connections held open past its bound cost the daemon no file descriptor (they wait in the
// kernel's backlog), so they cannot use up the ones every user's calls need.
func TestMetricsListenerBoundsConnections(t *testing.T) {
	td := startDaemon(t, "metrics:\n  listen: 127.0.0.1:0\n")
	addr := td.d.metrics.Addr().String()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	const held = 100
	for range held {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the server accepts what it will
	// The test's own ends, and at most the bound of the daemon's (a few more for its pollers).
	if got := fds() - before; got > held+maxMetricsConns+8 {
		t.Errorf("%d connections held open cost %d descriptors, more than %d of the daemon's", held, got, maxMetricsConns)
	}
}

// TestMetricsScrapesGatherOnceASecond: a local user scraping in a loop gets the daemon to
// gather its metrics once a second, not once a request.
func TestMetricsScrapesGatherOnceASecond(t *testing.T) {
	t.Parallel()
	n := 0
	c := &cachedGatherer{g: prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { n++; return nil, nil })}
	for range 100 {
		if _, err := c.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if n != 1 {
		t.Errorf("100 scrapes gathered %d times, want once", n)
	}
	c.at = c.at.Add(-scrapeEvery)
	c.Gather()
	if n != 2 {
		t.Errorf("a scrape a second later gathered %d times in all, want twice", n)
	}
}

// metrics.listen as unix:/path: a socket root and the admin group may read, removed at stop.
func TestMetricsListenerUnix(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "sandboxd-metrics-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "metrics.sock")
	td := startDaemon(t, "metrics:\n  listen: unix:"+sock+"\n")
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm()&0o007 != 0 {
		t.Fatalf("metrics socket mode %v: want a socket others cannot use", fi.Mode())
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	if fams := scrape(t, c, "http://sandboxd/metrics"); fams["sandboxd_sessions"] == nil {
		t.Fatal("no sandboxd_sessions in the scrape")
	}
	td.stop()
	if _, err := os.Lstat(sock); err == nil {
		t.Error("metrics socket left behind after stop")
	}
}

// A TCP listener off loopback is refused unless metrics.allow_remote says otherwise: by the
// config check and again by the listener, which checks what it bound.
func TestMetricsListenRefusesRemote(t *testing.T) {
	t.Parallel()
	log := zaptest.NewLogger(t)
	tests := []struct {
		name string
		m    config.Metrics
		ok   bool
	}{
		{"all interfaces", config.Metrics{Listen: ":0"}, false},
		{"unspecified v4", config.Metrics{Listen: "0.0.0.0:0"}, false},
		{"loopback", config.Metrics{Listen: "127.0.0.1:0"}, true},
		{"localhost", config.Metrics{Listen: "localhost:0"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := listenMetrics(tc.m, "sandboxd-admin", prometheus.NewRegistry(), log)
			if (err == nil) != tc.ok {
				t.Fatalf("listenMetrics(%+v) = %v, want ok=%v", tc.m, err, tc.ok)
			}
			if e != nil {
				e.stop()
			}
		})
	}
}
