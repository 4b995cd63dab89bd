package daemon

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// The calls of api.Backend: the API hands over wire requests and gets wire results, so the
// executor's types stay behind this line.

// Call implements api.Backend.
func (c *Core) Call(ctx context.Context, s *session.Session, caller session.Caller, cr protocol.CallRequest, onEvent func(protocol.Event), b api.Budget) (api.Outcome, error) {
	defer c.activity.running(s.ID)()
	c.refreshSettings(ctx, s)
	req, err := toRequest(cr)
	if err != nil {
		return api.Outcome{}, err
	}
	req.Room = b.Room
	var progress func(executor.Event)
	if onEvent != nil {
		progress = func(ev executor.Event) { onEvent(protocol.Event(ev)) }
	}
	o := c.pipeline.Run(ctx, s, caller, req, progress)
	c.fitter(s, b)(o)
	return outcome(o), nil
}

// Decide implements api.Backend.
func (c *Core) Decide(ctx context.Context, s *session.Session, caller session.Caller, cr protocol.CallRequest) (api.Outcome, error) {
	req, err := toRequest(cr)
	if err != nil {
		return api.Outcome{}, err
	}
	c.refreshSettings(ctx, s)
	return outcome(c.pipeline.Decide(ctx, s, caller, req)), nil
}

// Resume implements api.Backend.
func (c *Core) Resume(ctx context.Context, s *session.Session, caller session.Caller, approvalID string, wait time.Duration, b api.Budget) (api.Outcome, error) {
	defer c.activity.running(s.ID)()
	c.refreshSettings(ctx, s)
	o, err := c.pipeline.Resume(ctx, s, caller, approvalID, wait, nil)
	if err != nil {
		return api.Outcome{}, err
	}
	c.fitter(s, b)(o)
	return outcome(o), nil
}

// Batch implements api.Backend: every request is checked before any runs.
func (c *Core) Batch(ctx context.Context, s *session.Session, caller session.Caller, crs []protocol.CallRequest, b api.Budget) ([]api.Outcome, error) {
	defer c.activity.running(s.ID)()
	c.refreshSettings(ctx, s)
	reqs := make([]*executor.Request, len(crs))
	for i, cr := range crs {
		req, err := toRequest(cr)
		if err != nil {
			return nil, err
		}
		req.Room = b.Room
		reqs[i] = req
	}
	outs := c.pipeline.BatchFit(ctx, s, caller, reqs, c.Config().MaxParallelCalls, c.fitter(s, b))
	res := make([]api.Outcome, len(outs))
	for i, o := range outs {
		res[i] = outcome(o)
	}
	return res, nil
}

// fitter charges each outcome to the response's budget as it is done; one that does not fit
// is shrunk (its text persisted with a preview, its images left out) and let through, so
// every call of a batch gets an answer.
func (c *Core) fitter(s *session.Session, b api.Budget) func(*executor.Outcome) {
	return func(o *executor.Outcome) {
		n := executor.ResponseSize(o)
		if !b.Fits(n) {
			c.host.Shrink(s, o, b.Limit())
			n = executor.ResponseSize(o)
		}
		b.Charge(n)
	}
}

// Tools implements api.Backend: with a session, tools its bare-name deny rules cover are
// left out (a denied tool is not offered to the model at all).
func (c *Core) Tools(caller session.Caller, sessionID string) ([]protocol.ToolInfo, error) {
	hide := func(string) bool { return false }
	if sessionID != "" {
		s, err := c.store.See(caller, sessionID)
		if err != nil {
			return nil, err
		}
		rs := s.RuleSet()
		hide = func(name string) bool { return deniesWholeTool(rs, name) }
	}
	pool := c.pipeline.Registry().Pool(hide)
	out := make([]protocol.ToolInfo, 0, len(pool))
	for _, t := range pool {
		ti := protocol.ToolInfo{Name: t.Name(), Aliases: t.Aliases(), Description: t.Description(), Deferred: t.ShouldDefer(), External: t.External()}
		if !t.ShouldDefer() {
			ti.InputSchema = t.Schema()
		}
		out = append(out, ti)
	}
	return out, nil
}

// toRequest makes a wire request the pipeline's (the API checked its fields).
func toRequest(cr protocol.CallRequest) (*executor.Request, error) {
	req := &executor.Request{Tool: cr.Tool, Input: cr.Input, ToolUseID: cr.ToolUseID, Wait: time.Duration(cr.WaitMS) * time.Millisecond, Shell: cr.Shell,
		Unconfined: cr.Unconfined, Cwd: cr.Cwd}
	if cr.Mode != "" {
		m, err := permission.ParseMode(cr.Mode)
		if err != nil {
			return nil, errcode.New(errcode.Validation, err)
		}
		req.Mode = m
	}
	if req.ToolUseID == "" {
		req.ToolUseID = "call_" + session.NewID()[2:]
	}
	return req, nil
}

// outcome is what the API answers for o.
func outcome(o *executor.Outcome) api.Outcome {
	return api.Outcome{Result: callResult(o), Ran: o.Ran}
}

func callResult(o *executor.Outcome) protocol.CallResult {
	cr := protocol.CallResult{ToolUseID: o.ToolUseID, Tool: o.Tool, Decision: decisionView(o.Decision), Data: map[string]any{}}
	if o.Decision != nil {
		cr.ApprovalID = o.Decision.ApprovalID
	}
	if o.Result != nil {
		cr.IsError = o.Result.IsError
		cr.Content = blocksView(o.Result.Content)
		cr.Extra = o.Result.ExtraMessages
		if o.Result.Data != nil {
			cr.Data = o.Result.Data
		}
	}
	if cr.Content == nil {
		cr.Content = []protocol.Block{}
	}
	if o.Err != nil {
		cr.IsError = true
		cr.Error = &protocol.ErrorDetail{Class: string(o.Err.Code), Message: o.Err.Error(), Suggestions: o.Suggestions}
	}
	return cr
}

func blocksView(bs []executor.Block) []protocol.Block {
	if bs == nil {
		return nil
	}
	out := make([]protocol.Block, len(bs))
	for i, b := range bs {
		out[i] = protocol.Block(b)
	}
	return out
}

func decisionView(d *permission.Decision) *protocol.Decision {
	if d == nil {
		return nil
	}
	out := &protocol.Decision{
		Behavior: string(d.Behavior), Reason: d.Reason, Rule: d.Rule, Source: d.Source, Step: d.Step,
		Route: d.Route, ReadOnly: d.ReadOnly, Trace: d.Trace, ApprovalID: d.ApprovalID,
	}
	if d.Auto != nil {
		out.Auto = make([]protocol.AutoStage, len(d.Auto))
		for i, st := range d.Auto {
			out.Auto[i] = protocol.AutoStage(st)
		}
	}
	return out
}
