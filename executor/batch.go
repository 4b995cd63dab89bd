package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/sandboxd/sandboxd/session"
)

// Batch runs many calls and returns their outcomes in request order. Consecutive calls
// whose input is concurrency-safe run in parallel (at most maxParallel at once); any other
// call runs alone, in order, and its context change applies before the next call. Context
// changes of a parallel group are applied in request order once the whole group is done.
func (p *Pipeline) Batch(ctx context.Context, sess *session.Session, caller session.Caller, reqs []*Request, maxParallel int) []*Outcome {
	return p.BatchFit(ctx, sess, caller, reqs, maxParallel, nil)
}

// BatchFit is Batch with fit called on each outcome as soon as it is done (from the goroutine
// that ran it), so a response budget can shrink results as they come instead of after the
// whole batch held them all (limits.response_bytes).
func (p *Pipeline) BatchFit(ctx context.Context, sess *session.Session, caller session.Caller, reqs []*Request, maxParallel int, fit func(*Outcome)) []*Outcome {
	if fit == nil {
		fit = func(*Outcome) {}
	}
	if maxParallel < 1 {
		maxParallel = 1
	}
	outs := make([]*Outcome, len(reqs))
	for i := 0; i < len(reqs); {
		if !p.concurrencySafe(reqs[i]) {
			outs[i] = p.Run(ctx, sess, caller, reqs[i], nil)
			fit(outs[i])
			i++
			continue
		}
		j := i
		for j < len(reqs) && p.concurrencySafe(reqs[j]) {
			j++
		}
		p.runGroup(ctx, sess, caller, reqs[i:j], outs[i:j], maxParallel, fit)
		for _, o := range outs[i:j] {
			if o.Result != nil && o.Result.ContextChange != nil {
				p.host.applyContextChange(sess, o.Result.ContextChange)
			}
		}
		i = j
	}
	return outs
}

func (p *Pipeline) runGroup(ctx context.Context, sess *session.Session, caller session.Caller, reqs []*Request, outs []*Outcome, maxParallel int, fit func(*Outcome)) {
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for k := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outs[k] = p.run(ctx, &state{req: reqs[k], sess: sess, caller: caller, deferContext: true})
			fit(outs[k])
		}()
	}
	wg.Wait()
}

// concurrencySafe peeks at a request: only a known tool with well-formed input that says
// it is concurrency-safe may run beside others. Anything doubtful runs alone.
func (p *Pipeline) concurrencySafe(req *Request) bool {
	t, ok := p.registry.Lookup(req.Tool)
	if !ok {
		return false
	}
	var in map[string]any
	dec := json.NewDecoder(bytes.NewReader(req.Input))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil || in == nil {
		return false
	}
	return t.IsConcurrencySafe(Input(in))
}
