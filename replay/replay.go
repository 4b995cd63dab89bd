// Package replay decides recorded calls again under a candidate policy and reports the calls
// whose decision would change: a policy change's impact, measured on what really happened.
//
// The daemon records in each call's last record what its policy decision was made from (the
// Detail* keys below); this package rebuilds the policy's input from them, applies the
// candidate (rules added at the session source, an admin policy directory's settings, other
// Rego) and evaluates it with the same engine the daemon runs.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
)

// The record detail keys the daemon writes for a replay.
const (
	DetailPolicyDigest = "policy_digest"
	DetailRulesDigest  = "rules_digest"
	DetailRules        = "rules"
	DetailFacts        = "facts"
	// DetailFactsOmitted and DetailRulesOmitted say the facts or the rule set were too large
	// to record whole (audit.max_input_bytes); the value is their size in bytes.
	DetailFactsOmitted   = "facts_omitted_bytes"
	DetailRulesOmitted   = "rules_omitted_bytes"
	DetailPolicyDecision = "policy_decision"
	detailDecidedInput   = "decided_input"
)

// Rules is a session's rule set as recorded: enough to build it again.
type Rules struct {
	Rules     []permission.Rule    `json:"rules"`
	Effective permission.Effective `json:"effective"`
	Home      string               `json:"home,omitempty"`
	Cwd       string               `json:"cwd,omitempty"`
	// HomeLeadsTo and CwdLeadsTo are where they led (permission.Anchors): the rules anchored
	// there held under those paths too.
	HomeLeadsTo string `json:"home_leads_to,omitempty"`
	CwdLeadsTo  string `json:"cwd_leads_to,omitempty"`
	// unusable is why calls under this rule set cannot be replayed ("" when they can).
	unusable string
}

// RulesOf is rs as recorded.
func RulesOf(rs *permission.RuleSet) Rules {
	a := rs.Anchors()
	eff := rs.Effective()
	eff.Warnings = nil // why rules were dropped at load: not part of what decides
	return Rules{Rules: rs.Rules(), Effective: eff, Home: a.Home, Cwd: a.Cwd, HomeLeadsTo: a.HomeLeadsTo, CwdLeadsTo: a.CwdLeadsTo}
}

// Facts are a call's policy facts beside the record's tool, input and mode.
type Facts struct {
	Caller                  permission.Caller          `json:"caller"`
	Cwd                     string                     `json:"cwd"`
	Dirs                    []string                   `json:"dirs,omitempty"`
	Home                    string                     `json:"home,omitempty"`
	ReadOnly                bool                       `json:"read_only,omitempty"`
	Paths                   []permission.PathFact      `json:"paths,omitempty"`
	Bash                    *classifier.Classification `json:"bash,omitempty"`
	Domain                  string                     `json:"domain,omitempty"`
	HTTP                    *permission.HTTPFact       `json:"http,omitempty"`
	Hook                    *permission.HookVerdict    `json:"hook,omitempty"`
	RequiresUserInteraction bool                       `json:"requires_user_interaction,omitempty"`
}

// FactsOf is f as recorded.
func FactsOf(f *permission.Facts) Facts {
	return Facts{Caller: f.Caller, Cwd: f.Cwd, Dirs: f.Dirs, Home: f.Home, ReadOnly: f.ReadOnly,
		Paths: f.Paths, Bash: f.Bash, Domain: f.Domain, HTTP: f.HTTP, Hook: f.Hook,
		RequiresUserInteraction: f.RequiresUserInteraction}
}

// Candidate is what a replay changes.
type Candidate struct {
	// Allow, Deny and Ask are rules added at the session source of every recorded rule set.
	Allow, Deny, Ask []string
	// Policy, when set, replaces the recorded admin settings (policySettings rules, and the
	// modes they disable) with these, as a policy directory's *.json would load.
	Policy *permission.RuleSet
}

// Verdict is one decision as a replay reports it.
type Verdict struct {
	Behavior string `json:"behavior"`
	Reason   string `json:"reason,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Source   string `json:"source,omitempty"`
}

// Change is one call whose decision would change.
type Change struct {
	Seq     uint64          `json:"seq"`
	Time    time.Time       `json:"time"`
	User    string          `json:"user,omitempty"`
	UID     uint32          `json:"uid"`
	Session string          `json:"session,omitempty"`
	Tool    string          `json:"tool"`
	Input   json.RawMessage `json:"input,omitempty"`
	Old     Verdict         `json:"old"`
	New     Verdict         `json:"new"`
}

// Direction is "allow→deny" and the like.
func (c Change) Direction() string { return c.Old.Behavior + "→" + c.New.Behavior }

// Loosens reports whether the change lets something run, or run without asking, that did not.
func (c Change) Loosens() bool { return rank(c.New.Behavior) > rank(c.Old.Behavior) }

func rank(b string) int {
	switch b {
	case string(permission.Allow):
		return 2
	case string(permission.Ask):
		return 1
	}
	return 0
}

// Stats counts what a replay saw.
type Stats struct {
	// Replayed counts the calls decided again; Changed those whose behavior changed.
	Replayed int `json:"replayed"`
	Changed  int `json:"changed"`
	// Skipped counts the call records that could not be replayed, by reason.
	Skipped map[string]int `json:"skipped,omitempty"`
	// Directions counts the changes by direction.
	Directions map[string]int `json:"directions,omitempty"`
	// Policies counts the replayed calls by the digest of the policy that decided them.
	Policies map[string]int `json:"policies,omitempty"`
}

// The reasons a call record is skipped.
const (
	SkipNoFacts   = "no decision facts recorded (the call failed before the permission step, or was recorded by an older daemon)"
	SkipTooLarge  = "its input, facts or rule set were larger than audit.max_input_bytes, so they were not recorded whole"
	SkipBadRecord = "its recorded facts or rule set do not decode"
	SkipBadInput  = "its recorded input is not a JSON object (cut by audit.max_input_bytes, or not an object)"
	SkipNoRules   = "its rule set is not in the records read (removed by retention, or outside --since)"
	SkipNotPolicy = "decided before the policy (suspended session)"
)

// Replayer re-decides records. Feed it every record in log order (rule sets are recorded once
// and referenced by digest after); it is safe for concurrent Decide calls once fed.
type Replayer struct {
	engine *policy.Engine
	cand   Candidate
	extra  []permission.Rule

	mu    sync.Mutex
	rules map[string]*Rules              // recorded, by digest
	built map[string]*permission.RuleSet // with the candidate applied, by digest

	// seen holds the new decision of each distinct recorded basis (rules, mode, tool, input,
	// facts, as recorded): a day of calls repeats the same commands, and the policy is a
	// function of its input.
	seen *lru.Cache[string, permission.Decision]
}

const maxSeen = 1 << 16

// New compiles modules (the whole policy: see policy.EmbeddedModules) and prepares the candidate.
func New(ctx context.Context, modules map[string]string, cand Candidate) (*Replayer, error) {
	var extra []permission.Rule
	for _, x := range []struct {
		b    permission.Behavior
		list []string
	}{{permission.Deny, cand.Deny}, {permission.Ask, cand.Ask}, {permission.Allow, cand.Allow}} {
		for _, text := range x.list {
			r, err := permission.ParseRuleFor(text, x.b)
			if err != nil {
				return nil, fmt.Errorf("candidate %s rule %q: %w", x.b, text, err)
			}
			r.Source, r.Origin = permission.SourceSession, "replay"
			extra = append(extra, r)
		}
	}
	eng, err := policy.New(ctx, policy.Config{Modules: modules}, nil)
	if err != nil {
		return nil, err
	}
	seen, _ := lru.New[string, permission.Decision](maxSeen)
	return &Replayer{engine: eng, cand: cand, extra: extra,
		rules: map[string]*Rules{}, built: map[string]*permission.RuleSet{}, seen: seen}, nil
}

// Close stops the engine.
func (r *Replayer) Close() error { return r.engine.Close() }

// PolicyDigest is the digest of the policy replayed under.
func (r *Replayer) PolicyDigest() string { return r.engine.Digest() }

// Learn takes what a record teaches about later ones (a rule set recorded in full). A rule
// set left out as too large, or that does not decode, makes the calls that use it skips.
func (r *Replayer) Learn(rec *audit.Record) error {
	digest := rec.Detail[DetailRulesDigest]
	var rs *Rules
	if _, omitted := rec.Detail[DetailRulesOmitted]; omitted {
		rs = &Rules{unusable: SkipTooLarge}
	} else if js, ok := rec.Detail[DetailRules]; ok {
		rs = new(Rules)
		if err := json.Unmarshal([]byte(js), rs); err != nil {
			rs = &Rules{unusable: SkipBadRecord}
		}
	}
	if rs == nil {
		return nil
	}
	r.mu.Lock()
	r.rules[digest] = rs
	delete(r.built, digest)
	r.mu.Unlock()
	return nil
}

// Replayable reports whether rec is a call's last record (call.end, call.decide).
func Replayable(rec *audit.Record) bool {
	return rec.Kind == audit.KindCallEnd || rec.Kind == audit.KindCallDecide
}

// ErrSkip wraps the reason a record cannot be replayed.
type ErrSkip struct{ Reason string }

func (e *ErrSkip) Error() string { return "not replayed: " + e.Reason }

// Decide decides rec again. It returns the change, or nil when the behavior stays; a record
// that cannot be replayed is an *ErrSkip.
func (r *Replayer) Decide(ctx context.Context, rec *audit.Record) (*Change, error) {
	old, err := oldVerdict(rec)
	if err != nil {
		return nil, err
	}
	factsJS, ok := rec.Detail[DetailFacts]
	if _, omitted := rec.Detail[DetailFactsOmitted]; omitted {
		return nil, &ErrSkip{SkipTooLarge}
	}
	if !ok {
		return nil, &ErrSkip{SkipNoFacts}
	}
	digest := rec.Detail[DetailRulesDigest]
	input := rec.Input
	if d, ok := rec.Detail[detailDecidedInput]; ok {
		input = json.RawMessage(d)
	}
	key := strings.Join([]string{digest, rec.Mode, rec.Tool, string(input), factsJS}, "\x00")
	nd, hit := r.seen.Get(key)
	if !hit {
		var err error
		if nd, err = r.decide(ctx, rec, digest, input, factsJS); err != nil {
			return nil, err
		}
		r.seen.Add(key, nd)
	}
	if string(nd.Behavior) == old.Behavior {
		return nil, nil
	}
	ch := &Change{Seq: rec.Seq, Time: rec.Time, Session: rec.Session, Tool: rec.Tool, Input: input, Old: old,
		New: Verdict{Behavior: string(nd.Behavior), Reason: nd.Reason, Rule: nd.Rule, Source: nd.Source}}
	if c := rec.Caller; c != nil {
		ch.User, ch.UID = c.User, c.UID
	}
	return ch, nil
}

// decide evaluates one recorded basis under the candidate.
func (r *Replayer) decide(ctx context.Context, rec *audit.Record, digest string, input json.RawMessage, factsJS string) (permission.Decision, error) {
	rs, err := r.ruleSet(digest)
	if err != nil {
		return permission.Decision{}, err
	}
	var rf Facts
	if err := json.Unmarshal([]byte(factsJS), &rf); err != nil {
		return permission.Decision{}, &ErrSkip{SkipBadRecord}
	}
	var in map[string]any
	if len(input) > 0 {
		if err := json.Unmarshal(input, &in); err != nil {
			return permission.Decision{}, &ErrSkip{SkipBadInput}
		}
	}
	if t, _ := in["truncated"].(bool); t && in["preview"] != nil {
		return permission.Decision{}, &ErrSkip{SkipTooLarge} // the log kept only a preview
	}
	facts := &permission.Facts{Tool: rec.Tool, Input: in, Mode: permission.Mode(rec.Mode),
		Caller: rf.Caller, Cwd: rf.Cwd, Dirs: rf.Dirs, Home: rf.Home, ReadOnly: rf.ReadOnly,
		ToolFacts: permission.ToolFacts{Paths: rf.Paths, Bash: rf.Bash, Domain: rf.Domain, HTTP: rf.HTTP},
		Hook:      rf.Hook, RequiresUserInteraction: rf.RequiresUserInteraction}
	if _, err := rs.Effective().ResolveMode(facts.Mode); err != nil {
		// As the daemon's decider: a mode admin policy disables decides nothing else.
		return permission.Decision{Behavior: permission.Deny, Source: string(permission.SourcePolicy), Step: "mode",
			Reason: fmt.Sprintf("mode %s is disabled by admin policy: %v", facts.Mode, err)}, nil
	}
	d, err := r.engine.Decide(ctx, facts, rs)
	if err != nil {
		return permission.Decision{}, fmt.Errorf("record %d: %w", rec.Seq, err)
	}
	return d, nil
}

// oldVerdict is the policy's own recorded decision (before any route answered an ask).
func oldVerdict(rec *audit.Record) (Verdict, error) {
	if js, ok := rec.Detail[DetailPolicyDecision]; ok {
		var d audit.Decision
		if err := json.Unmarshal([]byte(js), &d); err != nil {
			return Verdict{}, fmt.Errorf("record %d: recorded policy decision: %w", rec.Seq, err)
		}
		return verdictOf(&d), nil
	}
	if rec.Decision == nil {
		return Verdict{}, &ErrSkip{SkipNoFacts}
	}
	if rec.Decision.Step == "suspended" {
		return Verdict{}, &ErrSkip{SkipNotPolicy}
	}
	return verdictOf(rec.Decision), nil
}

func verdictOf(d *audit.Decision) Verdict {
	return Verdict{Behavior: d.Behavior, Reason: d.Reason, Rule: d.Rule, Source: d.Source}
}

// ruleSet is the recorded rule set by digest with the candidate applied, built once.
func (r *Replayer) ruleSet(digest string) (*permission.RuleSet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs, ok := r.built[digest]; ok {
		return rs, nil
	}
	rec, ok := r.rules[digest]
	if !ok || digest == "" {
		return nil, &ErrSkip{SkipNoRules}
	}
	if rec.unusable != "" {
		return nil, &ErrSkip{rec.unusable}
	}
	rules := rec.Rules
	eff := rec.Effective
	if p := r.cand.Policy; p != nil {
		rules = rules[:0:0]
		for _, x := range rec.Rules {
			if x.Source != permission.SourcePolicy {
				rules = append(rules, x)
			}
		}
		rules = append(rules, p.Rules()...)
		pe := p.Effective()
		eff.DisableBypass = eff.DisableBypass || pe.DisableBypass
		eff.DisableAuto = eff.DisableAuto || pe.DisableAuto
		eff.AdditionalDirectories = append(append([]string(nil), eff.AdditionalDirectories...), pe.AdditionalDirectories...)
		if pe.ManagedRulesOnly {
			eff.ManagedRulesOnly = true
			kept := rules[:0]
			for _, x := range rules {
				if x.Behavior != permission.Allow || x.Source == permission.SourcePolicy {
					kept = append(kept, x)
				}
			}
			rules = kept
		}
	}
	if len(r.extra) > 0 {
		rules = append(append([]permission.Rule(nil), rules...), r.extra...)
	}
	rs := permission.NewRuleSet(rules, eff, permission.Anchors{Home: rec.Home, Cwd: rec.Cwd, HomeLeadsTo: rec.HomeLeadsTo, CwdLeadsTo: rec.CwdLeadsTo})
	r.built[digest] = rs
	return rs, nil
}

// IsSkip reports whether err says a record cannot be replayed, and why.
func IsSkip(err error) (string, bool) {
	var s *ErrSkip
	if errors.As(err, &s) {
		return s.Reason, true
	}
	return "", false
}

// Run replays records in log order: every record teaches (Learn), the call records keep
// selects are decided again, and onChange gets each change in log order. A record that cannot
// be replayed is counted in Stats.Skipped, never silently dropped. Decisions run on every CPU:
// a day of a busy server is a few hundred thousand records.
func (r *Replayer) Run(ctx context.Context, records iter.Seq2[*audit.Record, error], keep func(*audit.Record) bool, onChange func(*Change) error) (Stats, error) {
	return r.run(ctx, records, keep, onChange, runtime.GOMAXPROCS(0))
}

func (r *Replayer) run(ctx context.Context, records iter.Seq2[*audit.Record, error], keep func(*audit.Record) bool, onChange func(*Change) error, workers int) (Stats, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		rec    *audit.Record
		change *Change
		err    error
		done   chan struct{}
	}
	jobs := make(chan *job, 64*workers)
	ordered := make(chan *job, 64*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.change, j.err = r.Decide(ctx, j.rec)
				close(j.done)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(ordered)
		defer close(jobs)
		for rec, err := range records {
			if err == nil {
				err = ctx.Err()
			}
			if err == nil {
				// Before any later record is decided: rule sets are recorded once, then referenced.
				err = r.Learn(rec)
			}
			if err != nil {
				readErr <- err
				return
			}
			if !Replayable(rec) || (keep != nil && !keep(rec)) {
				continue
			}
			j := &job{rec: rec, done: make(chan struct{})}
			jobs <- j
			ordered <- j
		}
		readErr <- nil
	}()
	st := Stats{Skipped: map[string]int{}, Directions: map[string]int{}, Policies: map[string]int{}}
	var firstErr error
	for j := range ordered {
		<-j.done
		if firstErr != nil {
			continue // drain, so the reader and the workers end
		}
		if why, ok := IsSkip(j.err); ok {
			st.Skipped[why]++
			continue
		}
		if j.err != nil {
			firstErr = j.err
			cancel()
			continue
		}
		st.Replayed++
		st.Policies[j.rec.Detail[DetailPolicyDigest]]++
		if j.change == nil {
			continue
		}
		st.Changed++
		st.Directions[j.change.Direction()]++
		if err := onChange(j.change); err != nil {
			firstErr = err
			cancel()
		}
	}
	wg.Wait()
	if err := <-readErr; firstErr == nil && err != nil && !errors.Is(err, context.Canceled) {
		firstErr = err
	}
	return st, firstErr
}
