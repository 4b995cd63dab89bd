package executor

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/permission"
)

// Concurrency-safe calls run together; the others run alone, in order; results come back in
// request order; a serial call's context change applies before the next call; a parallel
// group's changes apply in request order after the group.
func TestBatchOrderingAndConcurrency(t *testing.T) {
	var mu sync.Mutex
	var order []string
	var inflight, maxInflight atomic.Int32
	modeSeen := map[string]permission.Mode{}
	def := Def{
		Name:            "Step",
		Schema:          `{"type":"object","properties":{"id":{"type":"string"},"safe":{"type":"boolean"},"mode":{"type":"string"}},"required":["id"],"additionalProperties":false}`,
		ConcurrencySafe: func(in Input) bool { return in.Bool("safe") },
		ReadOnly:        func(in Input) bool { return in.Bool("safe") },
		Run: func(_ context.Context, c *Call, _ Progress) (*Result, error) {
			n := inflight.Add(1)
			for {
				m := maxInflight.Load()
				if n <= m || maxInflight.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(30 * time.Millisecond)
			inflight.Add(-1)
			id := c.Input.String("id")
			mu.Lock()
			order = append(order, id)
			modeSeen[id] = c.Session.Mode()
			mu.Unlock()
			r := Text(id)
			if m := c.Input.String("mode"); m != "" {
				mode := permission.Mode(m)
				r.ContextChange = &ContextChange{Mode: &mode}
			}
			return r, nil
		},
	}
	p, s := newTestPipeline(t, allow(), &memRecorder{}, def)
	reqs := []*Request{
		req("Step", `{"id":"a","safe":true}`),
		req("Step", `{"id":"b","safe":true,"mode":"acceptEdits"}`),
		req("Step", `{"id":"c","safe":true,"mode":"dontAsk"}`),
		req("Step", `{"id":"d","mode":"plan"}`),
		req("Step", `{"id":"e"}`),
		req("Nope", `{}`),
	}
	for i, r := range reqs {
		r.ToolUseID = fmt.Sprint("t", i) // the calls of a batch run at once: each its own id
	}
	outs := p.Batch(context.Background(), s, s.Owner, reqs, 8)
	want := []string{"a", "b", "c", "d", "e"}
	for i, id := range want {
		if outs[i].Result.Content[0].Text != id {
			t.Errorf("result %d = %q, want %q", i, outs[i].Result.Content[0].Text, id)
		}
	}
	if outs[5].Err == nil {
		t.Error("unknown tool in a batch did not fail")
	}
	if maxInflight.Load() < 2 {
		t.Errorf("safe calls did not run in parallel (max in flight %d)", maxInflight.Load())
	}
	if order[3] != "d" || order[4] != "e" {
		t.Errorf("serial calls out of order: %v", order)
	}
	// c's change (dontAsk) is applied after b's, so d sees dontAsk; d's plan applies before e.
	if modeSeen["d"] != permission.ModeDontAsk {
		t.Errorf("d saw mode %s, want dontAsk (parallel changes in request order)", modeSeen["d"])
	}
	if modeSeen["e"] != permission.ModePlan {
		t.Errorf("e saw mode %s, want plan (serial change before the next call)", modeSeen["e"])
	}
	if modeSeen["a"] != permission.ModeDefault {
		t.Errorf("a saw mode %s: a parallel change leaked into its own group", modeSeen["a"])
	}
}
