package main

import (
	"context"
	"fmt"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"mvdan.cc/sh/v3/syntax"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/harness"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/protocol"
)

type benchOpts struct {
	quick    bool
	sections map[string]bool
	bin      string
	tmp      string
	grepTree string
	pace     time.Duration // the gap between paced spawn calls
}

// pick is the full or the quick figure.
func (o benchOpts) pick(full, quick int) int {
	if o.quick {
		return quick
	}
	return full
}

// env is what every section shares: the daemon, a client and a work directory.
type env struct {
	o      benchOpts
	rep    *Report
	d      *harness.Daemon
	c      *client.Client
	work   string // session cwd with the 4 KB file
	file4k string
	calls  atomic.Int64 // calls made to the daemon, for the RSS-after-N figure
}

func bench(ctx context.Context, o benchOpts) (*Report, error) {
	start := time.Now()
	rep := &Report{Time: start.UTC(), Quick: o.quick, CPUs: runtime.NumCPU(), Kernel: kernel()}
	e := &env{o: o, rep: rep}
	needDaemon := false
	for _, s := range []string{"decide", "spawn", "read", "grep", "throughput", "memory", "egress", "hook"} {
		needDaemon = needDaemon || o.sections[s]
	}
	var idleRSS int64
	if needDaemon {
		// The egress section's origin listens on the host's loopback.
		d, dir, err := startDaemon(ctx, o.bin, o.tmp, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		defer d.Close()
		e.d, e.c = d, d.Client(5*time.Minute)
		e.work = filepath.Join(dir, "work")
		e.file4k = filepath.Join(e.work, "file4k.txt")
		if err := os.Mkdir(e.work, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(e.file4k, fileOf(4096), 0o644); err != nil {
			return nil, err
		}
		// Settle: the first healthz is answered before the runtime has warmed up.
		time.Sleep(300 * time.Millisecond)
		if idleRSS, err = d.RSS(); err != nil {
			return nil, err
		}
	}
	steps := []struct {
		name string
		f    func(context.Context) error
	}{
		{"decide", e.decide}, {"spawn", e.spawn}, {"read", e.read}, {"grep", e.grep},
		{"classify", e.classify}, {"throughput", e.throughput}, {"audit", e.audit},
		{"memory", func(ctx context.Context) error { return e.memory(ctx, idleRSS) }},
		{"egress", e.egress}, {"hook", e.hook},
	}
	for _, s := range steps {
		if !o.sections[s.name] {
			continue
		}
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		t0 := time.Now()
		if err := s.f(ctx); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", s.name, err))
		}
		fmt.Fprintf(os.Stderr, "sbbench: %s done in %s\n", s.name, time.Since(t0).Round(10*time.Millisecond))
	}
	if e.d != nil {
		if err := e.d.Stop(15 * time.Second); err != nil {
			rep.Errors = append(rep.Errors, err.Error())
		}
	}
	rep.Duration = time.Since(start).Round(time.Second).String()
	return rep, nil
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// fileOf is n bytes of text in 64-byte lines.
func fileOf(n int) []byte {
	line := []byte(strings.Repeat("x", 63) + "\n")
	var b []byte
	for len(b) < n {
		b = append(b, line...)
	}
	return b[:n]
}

func (e *env) session(ctx context.Context, cs protocol.CreateSession) (string, error) {
	if cs.Cwd == "" {
		cs.Cwd = e.work
	}
	s, err := e.c.CreateSession(ctx, cs)
	if err != nil {
		return "", fmt.Errorf("create session: %w", err)
	}
	return s.ID, nil
}

// call makes one call and requires an allowed, successful result.
func (e *env) call(ctx context.Context, sid, tool string, in map[string]any) error {
	e.calls.Add(1)
	res, err := e.c.Call(ctx, sid, protocol.CallRequest{Tool: tool, Input: harness.Input(in)})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		msg := ""
		if len(res.Content) > 0 {
			msg = res.Content[0].Text
		}
		return fmt.Errorf("%s returned an error: %.300s", tool, msg)
	}
	return nil
}

// benchRules mirrors policy's benchmark rule sets: mostly Bash prefixes over many first
// words, path rules, domains, MCP tools; a few deny.
func benchRules(n int) (allow, deny []string) {
	words := []string{"npm", "git", "go", "make", "cargo", "docker", "kubectl", "python", "pip", "yarn"}
	for i := 0; len(allow)+len(deny) < n; i++ {
		switch i % 10 {
		case 0, 1, 2, 3:
			allow = append(allow, fmt.Sprintf("Bash(%s sub%d:*)", words[i%len(words)], i))
		case 4:
			allow = append(allow, fmt.Sprintf("Bash(tool%d *)", i))
		case 5:
			allow = append(allow, fmt.Sprintf("Edit(./pkg%d/**)", i))
		case 6:
			allow = append(allow, fmt.Sprintf("Read(//opt/data%d/**)", i))
		case 7:
			allow = append(allow, fmt.Sprintf("WebFetch(domain:*.site%d.com)", i))
		case 8:
			allow = append(allow, fmt.Sprintf("mcp__srv%d__*", i))
		case 9:
			if i%20 == 9 {
				deny = append(deny, fmt.Sprintf("Bash(%s danger%d *)", words[i%len(words)], i))
			} else {
				deny = append(deny, fmt.Sprintf("Read(~/.secret%d/**)", i))
			}
		}
	}
	return allow, deny
}

func ruleSet(n int) (*permission.RuleSet, error) {
	allow, deny := benchRules(n)
	var rules []permission.Rule
	for _, x := range []struct {
		b    permission.Behavior
		list []string
	}{{permission.Deny, deny}, {permission.Allow, allow}} {
		for i, s := range x.list {
			r, err := permission.ParseRuleFor(s, x.b)
			if err != nil {
				return nil, fmt.Errorf("rule %q: %w", s, err)
			}
			r.Source, r.Root = permission.Sources[i%len(permission.Sources)], "/w"
			rules = append(rules, r)
		}
	}
	return permission.NewRuleSet(rules, permission.Effective{}, permission.Anchors{Home: "/home/u", Cwd: "/w"}), nil
}

const (
	decideCmd = "npm sub0 --x && git status | grep x"
	oneLiner  = `git log --oneline -n 20 | grep -i fix | head -5 && ls -la src`
)

var script30 = strings.Repeat(`if [ -f go.mod ]; then cat go.mod | grep module; fi
for f in $(git ls-files '*.go'); do wc -l "$f"; done
find . -name '*.md' -type f | sort | uniq -c > /dev/null 2>&1
`, 10)

// benchFacts are the calls the in-process decision cycles through, classified for real.
func benchFacts() []*permission.Facts {
	opts := classifier.Options{Cwd: "/w", Home: "/home/u", WorkDirs: []string{"/w"}}
	mk := func(tool string, in map[string]any, ro bool, tf permission.ToolFacts) *permission.Facts {
		return &permission.Facts{Tool: tool, Input: in, Mode: permission.ModeDefault, Cwd: "/w", Home: "/home/u",
			Caller: permission.Caller{UID: 1000, GID: 1000, User: "u"}, ReadOnly: ro, ToolFacts: tf}
	}
	rd := func(p string, a permission.Access) []permission.PathFact {
		return []permission.PathFact{{Requested: p, Resolved: p, Access: a}}
	}
	return []*permission.Facts{
		mk("Bash", map[string]any{"command": decideCmd}, false, permission.ToolFacts{Bash: classifier.Classify(decideCmd, opts)}),
		mk("Bash", map[string]any{"command": "rm -rf build"}, false, permission.ToolFacts{Bash: classifier.Classify("rm -rf build", opts)}),
		mk("Edit", map[string]any{"file_path": "/w/pkg5/a.go"}, false, permission.ToolFacts{Paths: rd("/w/pkg5/a.go", permission.Write)}),
		mk("Read", map[string]any{"file_path": "/opt/data6/x"}, true, permission.ToolFacts{Paths: rd("/opt/data6/x", permission.Read)}),
		mk("WebFetch", map[string]any{"url": "https://a.site7.com/"}, true, permission.ToolFacts{Domain: "a.site7.com"}),
		mk("mcp__srv8__x", map[string]any{}, false, permission.ToolFacts{}),
	}
}

// gatherFacts is what the pipeline does before Decide: parse the command (as the classifier
// does) and resolve a path through the filesystem.
func gatherFacts(path, cmd string) error {
	p := syntax.NewParser()
	if _, err := p.Parse(strings.NewReader(cmd), ""); err != nil {
		return err
	}
	_, err := filepath.EvalSymlinks(path)
	return err
}

func (e *env) decide(ctx context.Context) error {
	iters := e.o.pick(3000, 500)
	const sec = "decision latency"
	dir, err := os.MkdirTemp(e.o.tmp, "sbbench-facts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "b.txt")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		return err
	}
	facts, err := measure(100, iters, func(int) error { return gatherFacts(path, decideCmd) })
	if err != nil {
		return err
	}
	eng, err := policy.New(ctx, policy.Config{}, zap.NewNop())
	if err != nil {
		return fmt.Errorf("policy engine: %w", err)
	}
	defer eng.Close()
	calls := benchFacts()
	for _, n := range []int{10, 200, 2000} {
		rs, err := ruleSet(n)
		if err != nil {
			return err
		}
		l, err := measure(20, iters, func(i int) error {
			_, err := eng.Decide(ctx, calls[i%len(calls)], rs)
			return err
		})
		if err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		for _, q := range p50p99 {
			e.rep.add(Row{Section: sec, Name: fmt.Sprintf("in-process Decide %d rules %s", n, q.name), Value: us(l.q(q.q)), Unit: "µs",
				Baseline: us(facts.q(q.q)), BaselineName: "gather facts (sh parse + EvalSymlinks)", Note: "no decision cache"})
		}
	}
	if e.d == nil {
		return nil
	}
	siters := e.o.pick(600, 150)
	health, err := measure(50, siters, func(int) error { _, err := e.c.Health(ctx); return err })
	if err != nil {
		return err
	}
	reqs := []protocol.CallRequest{
		{Tool: "Bash", Input: harness.Input(map[string]any{"command": decideCmd})},
		{Tool: "Bash", Input: harness.Input(map[string]any{"command": "rm -rf build"})},
		{Tool: "Read", Input: harness.Input(map[string]any{"file_path": e.file4k})},
	}
	for _, n := range []int{10, 200, 2000} {
		allow, deny := benchRules(n)
		sid, err := e.session(ctx, protocol.CreateSession{Rules: protocol.Rules{Allow: allow, Deny: deny}})
		if err != nil {
			return fmt.Errorf("%d rules: %w", n, err)
		}
		l, err := measure(20, siters, func(i int) error {
			e.calls.Add(1)
			_, err := e.c.Decide(ctx, sid, reqs[i%len(reqs)])
			return err
		})
		if err != nil {
			return fmt.Errorf("decide over the socket: %w", err)
		}
		_ = e.c.DeleteSession(ctx, sid)
		for _, q := range p50p99 {
			e.rep.add(Row{Section: sec, Name: fmt.Sprintf("socket decide %d rules %s", n, q.name), Value: us(l.q(q.q)), Unit: "µs",
				Baseline: us(health.q(q.q)), BaselineName: "GET /v1/healthz", Note: "includes the call.decide audit record, fsynced for the decision that allows a change"})
		}
	}
	return nil
}

var bwrapArgs = []string{"--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--die-with-parent", "/bin/true"}

func (e *env) spawn(ctx context.Context) error {
	n := e.o.pick(200, 40)
	const sec = "confined spawn of /bin/true"
	sid, err := e.session(ctx, protocol.CreateSession{Mode: "bypassPermissions"})
	if err != nil {
		return err
	}
	defer e.c.DeleteSession(ctx, sid)
	bash := func(command string) func(int) error {
		return func(int) error { return e.call(ctx, sid, "Bash", map[string]any{"command": command}) }
	}
	bare := func(int) error { return exec.CommandContext(ctx, "/bin/true").Run() }
	// Paced as an agent's calls come (the package benchmark likewise lets the pool refill
	// untimed), each command interleaved with the others and with the bare baseline.
	paced, err := measurePaced(10, n, e.o.pace, bare, bash("/bin/true"), bash("cd . && /bin/true"))
	if err != nil {
		return err
	}
	bareL, direct, shell := paced[0], paced[1], paced[2]
	// bwrap in a loop of its own, beside its own bare baseline: interleaved with the calls, the
	// kernel work it leaves behind (its namespaces torn down after it exits) and the caches it
	// clears landed in the calls measured after it, ~0.3x of bare fork/exec more on each.
	var bw, bareBW lat
	_, lerr := exec.LookPath("bwrap")
	if lerr == nil {
		bwrap := func(int) error {
			out, err := exec.CommandContext(ctx, "bwrap", bwrapArgs...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("bwrap: %w: %s", err, out)
			}
			return nil
		}
		l, err := measurePaced(10, n, e.o.pace, bare, bwrap)
		if err != nil {
			return err
		}
		bareBW, bw = l[0], l[1]
	}
	for _, q := range p50p99 {
		e.rep.add(Row{Section: sec, Name: "Bash `/bin/true` through the socket " + q.name, Value: ms(direct.q(q.q)), Unit: "ms",
			Baseline: ms(bareL.q(q.q)), BaselineName: "bare fork/exec /bin/true",
			Note: fmt.Sprintf("calls %v apart; exec'd as bash -c would, without bash; decision, audit and result included", e.o.pace)})
		e.rep.add(Row{Section: sec, Name: "Bash `cd . && /bin/true` (run by bash) through the socket " + q.name, Value: ms(shell.q(q.q)), Unit: "ms",
			Baseline: ms(bareL.q(q.q)), BaselineName: "bare fork/exec /bin/true"})
		if lerr == nil {
			e.rep.add(Row{Section: sec, Name: "Bash `/bin/true` through the socket vs bwrap " + q.name, Value: ms(direct.q(q.q)), Unit: "ms",
				Baseline: ms(bw.q(q.q)), BaselineName: "bwrap (--unshare-all, ro /, dev, proc, tmpfs /tmp)",
				Note: "each measured beside its own bare baseline, in the same run"})
			e.rep.add(Row{Section: sec, Name: "bwrap " + q.name, Value: ms(bw.q(q.q)), Unit: "ms",
				Baseline: ms(bareBW.q(q.q)), BaselineName: "bare fork/exec /bin/true"})
		}
	}
	// Back to back, the pool refills while the next call runs: both share two cores here.
	b2b, err := measure(10, n, bash("/bin/true"))
	if err != nil {
		return err
	}
	bareB2B, err := measure(10, n, bare)
	if err != nil {
		return err
	}
	e.rep.add(Row{Section: sec, Name: "Bash `/bin/true` through the socket, back to back, p50", Value: ms(b2b.q(0.5)), Unit: "ms",
		Baseline: ms(bareB2B.q(0.5)), BaselineName: "bare fork/exec /bin/true, back to back"})
	return e.spawnBreakdown(ctx, sec, n/2, bash("/bin/true"))
}

// spawnBreakdown says where the time of paced calls goes: the mean of each pipeline step and
// spawn step from the daemon's histograms over the same calls, and the rest (HTTP, JSON, the
// client) as the difference from the latency the client saw.
func (e *env) spawnBreakdown(ctx context.Context, sec string, n int, call func(int) error) error {
	before, err := e.metricFamilies(ctx)
	if err != nil {
		return err
	}
	l, err := measurePaced(0, n, e.o.pace, call)
	if err != nil {
		return err
	}
	after, err := e.metricFamilies(ctx)
	if err != nil {
		return err
	}
	mean := l[0].mean()
	add := func(name string, sec64 float64, note string) {
		e.rep.add(Row{Section: sec, Name: "  where a paced `/bin/true` call's time goes: " + name, Value: sec64 / float64(n) * 1e6, Unit: "µs",
			Baseline: us(mean), BaselineName: "the call's mean latency", Note: note})
	}
	var inStages, small float64
	stages := histTotals(before, "sandboxd_call_stage_seconds", "stage").delta(histTotals(after, "sandboxd_call_stage_seconds", "stage"))
	for _, name := range stages.names {
		inStages += stages.sums[name]
		if stages.sums[name]/float64(n) < 10e-6 {
			small += stages.sums[name]
			continue
		}
		add("pipeline step "+name, stages.sums[name], "sandboxd_call_stage_seconds")
	}
	add("the other pipeline steps", small, "each under 10 µs")
	add("outside the pipeline (HTTP both ways, JSON, the client)", mean.Seconds()*float64(n)-inStages, "the client's latency minus the pipeline's steps")
	steps := histTotals(before, "sandboxd_spawn_step_seconds", "step").delta(histTotals(after, "sandboxd_spawn_step_seconds", "step"))
	for _, name := range steps.names {
		add("  spawn step "+name, steps.sums[name], fmt.Sprintf("inside execute; %d of %d calls", steps.counts[name], n))
	}
	return nil
}

func (e *env) read(ctx context.Context) error {
	n := e.o.pick(1000, 200)
	const sec = "allowed Read of a 4 KB file"
	direct, err := measure(50, n, func(int) error { _, err := os.ReadFile(e.file4k); return err })
	if err != nil {
		return err
	}
	sid, err := e.session(ctx, protocol.CreateSession{})
	if err != nil {
		return err
	}
	defer e.c.DeleteSession(ctx, sid)
	read := func(int) error { return e.call(ctx, sid, "Read", map[string]any{"file_path": e.file4k}) }
	if _, err := measure(20, 0, read); err != nil {
		return err
	}
	before, err := e.auditWait(ctx)
	if err != nil {
		return err
	}
	sock, err := measure(0, n, read)
	if err != nil {
		return err
	}
	after, err := e.auditWait(ctx)
	if err != nil {
		return err
	}
	for _, q := range p50p99 {
		e.rep.add(Row{Section: sec, Name: "Read through the socket " + q.name, Value: us(sock.q(q.q)), Unit: "µs",
			Baseline: us(direct.q(q.q)), BaselineName: "os.ReadFile"})
	}
	// The daemon's own histogram of time calls spent waiting on the audit log, over the same
	// calls: its share of the Read's mean latency.
	calls := after.ends - before.ends
	if calls == 0 {
		return fmt.Errorf("audit wait histogram did not count the Reads")
	}
	perCall := (after.seconds - before.seconds) / float64(calls)
	e.rep.add(Row{Section: sec, Name: "time a Read waits on the audit log (start queued, end written), mean", Value: perCall * 1e6,
		Unit: "µs", Baseline: us(sock.mean()), BaselineName: "the Read's mean latency through the socket",
		Note: fmt.Sprintf("%d calls, sandboxd_audit_wait_seconds, state dir on %s", calls, e.o.tmp)})
	return nil
}

// auditTotals is the daemon's sandboxd_audit_wait_seconds histogram at one moment: seconds
// waited over all wait levels, and how many end records (written) were counted.
type auditTotals struct {
	seconds float64
	ends    uint64
}

func (e *env) auditWait(ctx context.Context) (auditTotals, error) {
	fams, err := e.metricFamilies(ctx)
	if err != nil {
		return auditTotals{}, err
	}
	var t auditTotals
	for _, m := range fams["sandboxd_audit_wait_seconds"].GetMetric() {
		h := m.GetHistogram()
		t.seconds += h.GetSampleSum()
		for _, l := range m.GetLabel() {
			if l.GetName() == "wait" && l.GetValue() == "written" {
				t.ends += h.GetSampleCount()
			}
		}
	}
	return t, nil
}

// metricFamilies is the daemon's /v1/metrics, parsed.
func (e *env) metricFamilies(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	resp, err := e.c.Open(ctx, client.MethodGet, "/v1/metrics", nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET /v1/metrics: HTTP %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return fams, nil
}

// histSums is one histogram family's sums (seconds) and counts by the value of one label.
type histSums struct {
	names  []string // in the daemon's order
	sums   map[string]float64
	counts map[string]uint64
}

// delta is later minus h, label by label.
func (h histSums) delta(later histSums) histSums {
	d := histSums{names: later.names, sums: map[string]float64{}, counts: map[string]uint64{}}
	for _, n := range later.names {
		d.sums[n] = later.sums[n] - h.sums[n]
		d.counts[n] = later.counts[n] - h.counts[n]
	}
	return d
}

func histTotals(fams map[string]*dto.MetricFamily, metric, label string) histSums {
	h := histSums{sums: map[string]float64{}, counts: map[string]uint64{}}
	for _, m := range fams[metric].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				h.names = append(h.names, l.GetValue())
				h.sums[l.GetValue()] += m.GetHistogram().GetSampleSum()
				h.counts[l.GetValue()] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return h
}

func (e *env) grep(ctx context.Context) error {
	n := e.o.pick(15, 4)
	const sec = "Grep over a large tree"
	tree := e.o.grepTree
	if _, err := os.Stat(tree); err != nil {
		return fmt.Errorf("grep tree: %w", err)
	}
	in := executor.Input{"pattern": "func New[A-Z]", "path": tree, "output_mode": "files_with_matches"}
	args, _ := executor.GrepArgs(in, tree)
	rg, err := measure(1, n, func(int) error {
		cmd := exec.CommandContext(ctx, "rg", args...)
		cmd.Stdout = io.Discard
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("rg: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sid, err := e.session(ctx, protocol.CreateSession{AdditionalDirs: []string{tree}})
	if err != nil {
		return err
	}
	defer e.c.DeleteSession(ctx, sid)
	sock, err := measure(1, n, func(int) error { return e.call(ctx, sid, "Grep", in) })
	if err != nil {
		return err
	}
	e.rep.add(Row{Section: sec, Name: "Grep `func New[A-Z]` " + tree + " through the socket p50", Value: ms(sock.q(0.5)), Unit: "ms",
		Baseline: ms(rg.q(0.5)), BaselineName: "rg with the same flags", Note: fmt.Sprintf("%d runs", n)})
	return nil
}

// perOp is the mean time of f over n runs.
func perOp(n int, f func() error) (time.Duration, error) {
	s := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, err
		}
	}
	return time.Since(s) / time.Duration(n), nil
}

func (e *env) classify(context.Context) error {
	n := e.o.pick(20000, 3000)
	const sec = "classify"
	opts := classifier.Options{Cwd: "/home/u/proj", Home: "/home/u", WorkDirs: []string{"/home/u/proj"}}
	for _, c := range []struct {
		name, src string
		n         int
	}{{"one-liner", oneLiner, n}, {"30-line script", script30, n / 10}} {
		p := syntax.NewParser(syntax.Variant(syntax.LangBash))
		parse, err := perOp(c.n, func() error { _, err := p.Parse(strings.NewReader(c.src), ""); return err })
		if err != nil {
			return err
		}
		cl, err := perOp(c.n, func() error {
			if r := classifier.Classify(c.src, opts); r.ParseError != nil {
				return fmt.Errorf("classify: %s", *r.ParseError)
			}
			return nil
		})
		if err != nil {
			return err
		}
		e.rep.add(Row{Section: sec, Name: "classifier.Classify " + c.name + " mean", Value: us(cl), Unit: "µs",
			Baseline: us(parse), BaselineName: "syntax.Parser.Parse alone"})
		// Per-call quantiles too: a mean hides the slow tail an agent's hot path feels.
		parseLat, err := measure(100, c.n, func(int) error { _, err := p.Parse(strings.NewReader(c.src), ""); return err })
		if err != nil {
			return err
		}
		clLat, err := measure(100, c.n, func(int) error { classifier.Classify(c.src, opts); return nil })
		if err != nil {
			return err
		}
		for _, q := range p50p99 {
			e.rep.add(Row{Section: sec, Name: "classifier.Classify " + c.name + " " + q.name, Value: us(clLat.q(q.q)), Unit: "µs",
				Baseline: us(parseLat.q(q.q)), BaselineName: "syntax.Parser.Parse alone"})
		}
	}
	return nil
}

// load runs workers concurrently for d and returns calls/s and the sorted latencies.
func load(ctx context.Context, workers int, d time.Duration, f func(w int) error) (float64, lat, error) {
	var mu sync.Mutex
	var all lat
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var mine lat
			for time.Now().Before(deadline) && ctx.Err() == nil {
				s := time.Now()
				if err := f(w); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					break
				}
				mine = append(mine, time.Since(s))
			}
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	return float64(len(all)) / el.Seconds(), all.sorted(), firstErr
}

func (e *env) throughput(ctx context.Context) error {
	dur := time.Duration(e.o.pick(3000, 800)) * time.Millisecond
	const sec = "throughput"
	for _, conc := range []int{1, 16, 64} {
		// An agent is mostly one session calling in sequence; many agents share the daemon.
		// Spread the workers over at most 8 sessions so the figure is the daemon's, not 64
		// per-session workers starting up.
		nsess := min(conc, 8)
		sids := make([]string, nsess)
		for i := range sids {
			sid, err := e.session(ctx, protocol.CreateSession{Mode: "bypassPermissions"})
			if err != nil {
				return err
			}
			sids[i] = sid
			// Start the session's worker outside the measurement.
			if err := e.call(ctx, sid, "Read", map[string]any{"file_path": e.file4k}); err != nil {
				return err
			}
		}
		for _, t := range []struct {
			name, base string
			sock       func(w int) error
			direct     func(w int) error
		}{
			{"Read 4 KB", "os.ReadFile",
				func(w int) error { return e.call(ctx, sids[w%nsess], "Read", map[string]any{"file_path": e.file4k}) },
				func(int) error { _, err := os.ReadFile(e.file4k); return err }},
			{"Bash `true`", "fork/exec /bin/true",
				func(w int) error { return e.call(ctx, sids[w%nsess], "Bash", map[string]any{"command": "true"}) },
				func(int) error { return exec.CommandContext(ctx, "/bin/true").Run() }},
		} {
			bRate, bLat, err := load(ctx, conc, dur/2, t.direct)
			if err != nil {
				return err
			}
			rate, l, err := load(ctx, conc, dur, t.sock)
			if err != nil {
				return fmt.Errorf("%s at %d: %w", t.name, conc, err)
			}
			e.rep.add(Row{Section: sec, Name: fmt.Sprintf("%s calls/s at concurrency %d", t.name, conc), Value: rate, Unit: "calls/s",
				Baseline: bRate, BaselineName: t.base + " at the same concurrency", Note: fmt.Sprintf("%d sessions", nsess)})
			e.rep.add(Row{Section: sec, Name: fmt.Sprintf("%s p99 at concurrency %d", t.name, conc), Value: ms(l.q(0.99)), Unit: "ms",
				Baseline: ms(bLat.q(0.99)), BaselineName: t.base})
		}
		for _, sid := range sids {
			_ = e.c.DeleteSession(ctx, sid)
		}
	}
	return nil
}

// audit compares group commit from 64 writers with one writer, where every Append waits for
// its own fdatasync (fsync per record), on the same disk and the same code.
func (e *env) audit(ctx context.Context) error {
	const sec = "audit"
	nGroup, nSerial := e.o.pick(20000, 3000), e.o.pick(1000, 200)
	rate := func(writers, n int) (float64, error) {
		dir, err := os.MkdirTemp(e.o.tmp, "sbbench-audit-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		l, err := audit.Open(audit.Config{Dir: dir}, zap.NewNop())
		if err != nil {
			return 0, err
		}
		var next atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					r := &audit.Record{Kind: audit.KindCallStart, Caller: &audit.Caller{UID: 1000, GID: 1000, PID: 4242, User: "u"},
						Session: "s_bench", Mode: "default", Tool: "Bash", ToolUseID: fmt.Sprintf("toolu_%d", i),
						Input:    []byte(`{"command":"go test ./... -run TestX","description":"run the tests","timeout":120000}`),
						Decision: &audit.Decision{Behavior: "allow", Reason: "rule", Rule: "Bash(go test:*)", Source: "session", Step: "allow_rule"}}
					if err := l.Append(ctx, r); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		el := time.Since(start)
		if err := l.Close(); err != nil {
			return 0, err
		}
		if err, _ := firstErr.Load().(error); err != nil {
			return 0, err
		}
		return float64(n) / el.Seconds(), nil
	}
	serial, err := rate(1, nSerial)
	if err != nil {
		return err
	}
	for _, w := range []int{16, 64} {
		g, err := rate(w, nGroup)
		if err != nil {
			return err
		}
		e.rep.add(Row{Section: sec, Name: fmt.Sprintf("audit.Log Append, group commit, %d writers", w), Value: g, Unit: "records/s",
			Baseline: serial, BaselineName: "fsync per record (1 writer)", Note: "dir on " + e.o.tmp})
	}
	return nil
}

func (e *env) memory(ctx context.Context, idle int64) error {
	const sec = "daemon memory"
	target := int64(e.o.pick(10000, 2000))
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	if left := target - e.calls.Load(); left > 0 {
		sids := make([]string, 4)
		for i := range sids {
			sid, err := e.session(ctx, protocol.CreateSession{})
			if err != nil {
				return err
			}
			sids[i] = sid
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		var firstErr atomic.Value
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for next.Add(1) <= left {
					if err := e.call(ctx, sids[w%len(sids)], "Read", map[string]any{"file_path": e.file4k}); err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		for _, sid := range sids {
			_ = e.c.DeleteSession(ctx, sid)
		}
		if err, _ := firstErr.Load().(error); err != nil {
			return err
		}
	}
	time.Sleep(200 * time.Millisecond)
	after, err := e.d.RSS()
	if err != nil {
		return err
	}
	e.rep.add(Row{Section: sec, Name: fmt.Sprintf("daemon RSS after %d calls", e.calls.Load()), Value: mb(after), Unit: "MiB",
		Baseline: mb(idle), BaselineName: "idle RSS at start"})

	nsess := e.o.pick(200, 50)
	before, err := e.d.RSS()
	if err != nil {
		return err
	}
	workersBefore := e.subtreeRSS()
	sids := make([]string, 0, nsess)
	for i := 0; i < nsess; i++ {
		sid, err := e.session(ctx, protocol.CreateSession{})
		if err != nil {
			return err
		}
		sids = append(sids, sid)
	}
	time.Sleep(200 * time.Millisecond)
	with, err := e.d.RSS()
	if err != nil {
		return err
	}
	workers := e.subtreeRSS() - workersBefore
	for _, sid := range sids {
		_ = e.c.DeleteSession(ctx, sid)
	}
	per := float64(with-before) / float64(nsess) / 1024
	e.rep.add(Row{Section: sec, Name: fmt.Sprintf("daemon RSS per session (%d sessions)", nsess), Value: per, Unit: "KiB",
		Baseline: float64(idle) / 1024, BaselineName: "idle daemon RSS"})
	e.rep.add(Row{Section: sec, Name: fmt.Sprintf("confined worker PSS per session (%d sessions)", nsess), Value: float64(workers) / float64(nsess) / 1024, Unit: "KiB",
		Baseline: float64(idle) / 1024, BaselineName: "idle daemon RSS", Note: "processes in the daemon's cgroup subtree"})
	return nil
}

// subtreeRSS sums the proportional set size of every process in the daemon's cgroup subtree
// (session workers): PSS splits the shared binary's pages among the workers, where RSS would
// count them once per worker.
func (e *env) subtreeRSS() int64 {
	var sum int64
	for _, p := range e.d.SubtreeProcs() {
		sum += pss(p)
	}
	return sum
}

func pss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}
