package daemon

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/egress"
)

// TestNetConnectRecordBounded: a refusal's reason quotes what the program sent (a 60 000-digit
// port, a host of 60 000 letters), and a net.connect record keeps only the start of each text,
// so a proxied program's stream of bad requests cannot make its records a hundred times larger.
func TestNetConnectRecordBounded(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(audit.Config{Dir: dir}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := newRecorder(l, prometheus.NewRegistry())
	long := strings.Repeat("a", 60000)
	ev := egress.Event{Session: "s_x", Kind: egress.KindConnect, Host: long, Port: 443, Method: long, Path: long,
		Reason: "bad request: " + long, Rule: long, Via: "WebFetch"}
	if err := r.netConnect(ev, &audit.Caller{UID: 1000}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for rec, err := range audit.Query(dir, audit.Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind != audit.KindNetConnect {
			continue
		}
		n++
		for k, v := range rec.Detail {
			if max := map[bool]int{true: maxNetPathBytes, false: maxNetDetailBytes}[k == "path"] + 64; len(v) > max {
				t.Errorf("detail %s of %d bytes, want at most %d", k, len(v), max)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d net.connect records, want 1", n)
	}
}
