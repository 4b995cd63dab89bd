package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// BenchmarkAskAnswerExecute measures, through the socket, a call that asks, waits, is
// answered by another client watching the approvals stream and then runs, against the same
// call allowed outright by a rule, in the same run; ratio is the first over the second.
func BenchmarkAskAnswerExecute(b *testing.B) {
	td := startDaemon(b, "")
	dir := rootDir(b)
	allowed := td.newSession(b, fmt.Sprintf(`{"cwd":%q,"mode":"default","rules":{"allow":["Bash(touch f)"]}}`, dir))
	asking := td.newSession(b, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	body := callBody("Bash", `{"command":"touch f"}`, `,"wait_ms":10000`)

	req, _ := http.NewRequest("GET", "http://sandboxd/v1/approvals/stream", nil)
	resp, err := td.http.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan approval.Event, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev approval.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "created" {
				events <- ev
			}
		}
	}()
	run := func(sid string, ask bool) time.Duration {
		start := time.Now()
		done := make(chan protocol.CallResult, 1)
		go func() { done <- td.callRaw(b, sid, body) }()
		if ask {
			ev := <-events
			if code, out := td.answer(b, ev.Approval.ID, `{"answer":"allow"}`); code != 200 {
				b.Errorf("answer: %d %s", code, out)
			}
		}
		r := <-done
		if behavior(r) != permission.Allow || r.IsError {
			b.Fatalf("call: %+v", r)
		}
		return time.Since(start)
	}
	run(allowed.ID, false) // warm the worker and the pools
	run(asking.ID, true)
	var tAllowed, tAsk time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tAllowed += run(allowed.ID, false)
		tAsk += run(asking.ID, true)
	}
	b.StopTimer()
	b.ReportMetric(float64(tAllowed.Microseconds())/float64(b.N), "allowed_us/op")
	b.ReportMetric(float64(tAsk.Microseconds())/float64(b.N), "ask_answer_execute_us/op")
	b.ReportMetric(float64(tAsk)/float64(tAllowed), "ratio")
}
