package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandboxd/sandboxd/internal/gctune"
)

// BenchmarkAppend measures durable records/s: group commit at 1, 16 and 64 concurrent writers
// against one fdatasync per record (maxBatch 1) at 64 writers, in the same run. Compare the
// rec/s metrics; the target is group/64 >= 20x fsync-per-record/64.
//
//	go test -run '^$' -bench Append -benchtime 40000x ./audit/  (fewer calls leave too few syncs to compare)
func BenchmarkAppend(b *testing.B) {
	defer gctune.Apply()() // the daemon's GC settings: measure what it runs
	for _, m := range []struct {
		name     string
		maxBatch int
		writers  []int
	}{
		{"fsync-per-record", 1, []int{1, 64}},
		{"group", 0, []int{1, 16, 64}},
	} {
		for _, w := range m.writers {
			b.Run(m.name+"/writers="+strconv.Itoa(w), func(b *testing.B) {
				benchAppend(b, m.maxBatch, w)
			})
		}
	}
}

func benchAppend(b *testing.B, maxBatch, writers int) {
	l, err := Open(Config{Dir: b.TempDir(), maxBatch: maxBatch}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				// A typical call.start: caller, session, decision and a small input without
				// secrets (an input that trips the secret regexps costs a few µs more).
				r := callRecord(int(next.Load()))
				r.Kind, r.Outcome = KindCallStart, nil
				r.Input = []byte(`{"command":"go test ./... -run TestX","description":"run the tests","timeout":120000}`)
				if err := l.Append(context.Background(), r); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
	b.ReportMetric(float64(b.N)/float64(max(l.syncs.Load(), 1)), "rec/sync")
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRedactManyAssignments: a command of 2 000 secret-named assignments (57 KB) is
// redacted in time linear in its length: each match once read the whole text again.
func BenchmarkRedactManyAssignments(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("true")
	for i := range 2000 {
		fmt.Fprintf(&sb, " a%d_token=abcdefghij", i)
	}
	js, _ := json.Marshal(map[string]string{"command": sb.String(), "description": sb.String()})
	b.ResetTimer()
	for range b.N {
		Redact(js)
	}
}
