package daemon

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecideSocket measures a hook's decision through the socket (a read-only Bash
// command in default mode, decided, audited and answered) against GET /v1/healthz on the same
// connection in the same run; ratio is the first over the second.
//
//	SANDBOXD_REQUIRE_ROOT=1 go test -run '^$' -bench DecideSocket -benchtime 5000x ./daemon/
func BenchmarkDecideSocket(b *testing.B) {
	td := startDaemon(b, "")
	s := td.newSession(b, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, rootDir(b)))
	body := `{"tool":"Bash","input":{"command":"/bin/true"},"shell":"zsh"}`
	decide := func() time.Duration {
		start := time.Now()
		if code, out := td.do(b, "POST", "/v1/sessions/"+s.ID+"/decide", body); code != 200 {
			b.Fatal(code, string(out))
		}
		return time.Since(start)
	}
	health := func() time.Duration {
		start := time.Now()
		if code, out := td.do(b, "GET", "/v1/healthz", ""); code != 200 {
			b.Fatal(code, string(out))
		}
		return time.Since(start)
	}
	for range 100 { // the decision cache, the audit file, the connection
		decide()
		health()
	}
	var tDecide, tHealth time.Duration
	b.ResetTimer()
	for range b.N {
		tDecide += decide()
		tHealth += health()
	}
	b.StopTimer()
	b.ReportMetric(float64(tDecide.Microseconds())/float64(b.N), "decide_us/op")
	b.ReportMetric(float64(tHealth.Microseconds())/float64(b.N), "healthz_us/op")
	b.ReportMetric(float64(tDecide)/float64(tHealth), "ratio")
}
