package daemon

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/sandbox"
)

// opsMetrics are what an operator watches beside what the API and the step timers already
// register (sandboxd_calls_total, sandboxd_requests_total, sandboxd_call_stage_seconds,
// sandboxd_spawn_step_seconds, sandboxd_audit_wait_seconds): decision and execution
// latency on buckets that fit them, confinement failures by step, kills by cause, and the
// gauges of what is waiting (audit queue, approvals) and open (sessions).
type opsMetrics struct {
	decision      prometheus.Histogram
	execution     prometheus.Histogram
	setupFailures *prometheus.CounterVec
	kills         *prometheus.CounterVec
}

// setupClasses are the steps the confined child reports a failure at (sbx_fail in
// sandbox/nsinit*.c), a closed set so no path or command from the report becomes a label. A
// failure before the child ran is "parent" (cgroup, spec, fork); an unknown step is "other".
var setupClasses = map[string]bool{
	"spec": true, "prelude": true, "receive": true, "setns": true, "mount": true, "rlimit": true,
	"landlock": true, "capabilities": true, "credentials": true, "chdir": true, "pdeathsig": true,
	"no_new_privs": true, "fds": true, "sync": true, "seccomp": true, "execve": true,
}

// newOpsMetrics registers the operator metrics on reg. The gauges read core and al at scrape
// time, so they cost nothing between scrapes.
func newOpsMetrics(reg prometheus.Registerer, core *Core, al *audit.Log) *opsMetrics {
	m := &opsMetrics{
		decision: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sandboxd_decision_seconds",
			Help: "Time the permission step took to decide a call (rules, safety checks and the Rego policy; an approval's wait is not included).",
			// 10 µs .. 1.3 s: a cached decision is microseconds, a cold Rego evaluation milliseconds.
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 9),
		}),
		execution: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sandboxd_execution_seconds",
			Help: "Time the execute step took for calls that ran (confined start, the tool, its end).",
			// 1 ms .. 1.2 h: a confined /bin/true is milliseconds, a build or test run minutes.
			Buckets: prometheus.ExponentialBuckets(1e-3, 4, 12),
		}),
		setupFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_setup_failures_total",
			Help: "Calls whose confinement could not be set up, by the step that failed (parent: before the child ran).",
		}, []string{"class"}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sandboxd_kills_total",
			Help: "Foreground calls whose cgroup was killed or limited, by cause (oom, timeout, pids).",
		}, []string{"reason"}),
	}
	for _, r := range []string{"oom", "timeout", "pids"} {
		m.kills.WithLabelValues(r) // present at 0 from the start, so rate() sees the first one
	}
	reg.MustRegister(m.decision, m.execution, m.setupFailures, m.kills,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_sessions",
			Help: "Sessions open, every owner's.",
		}, func() float64 { return float64(core.store.Len()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_approvals_pending",
			Help: "Asks waiting for a person's answer, every owner's.",
		}, func() float64 { return float64(pendingApprovals(core.approvals)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_audit_queue_depth",
			Help: "Audit records waiting for the writer; one that keeps growing means the disk cannot keep up.",
		}, func() float64 { return float64(al.QueueDepth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_config_last_reload_successful",
			Help: "1 if the last configuration reload succeeded (or none was made); 0 means the daemon serves on an older configuration than the file's.",
		}, func() float64 { return boolGauge(core.reloads.ok(&core.reloads.config)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_policy_last_load_successful",
			Help: "1 if the last policy load (reload, policy directory change, bundle) succeeded, the admin settings files included; 0 means the daemon decides with an older policy than the admin's files, or refuses sessions because an admin settings file does not load.",
		}, func() float64 { return boolGauge(core.reloads.policyOK()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sandboxd_audit_healthy",
			Help: "1 while the audit log can be written; 0 means calls are refused (fail closed).",
		}, func() float64 {
			if al.Healthy() {
				return 1
			}
			return 0
		}),
	)
	return m
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// pendingApprovals counts without copying the queue.
func pendingApprovals(q *approval.Queue) int {
	if q == nil {
		return 0
	}
	n := 0
	q.Pending(func(approval.Approval) bool { n++; return false })
	return n
}

// stages returns the pipeline's step observer: next (the step timers) sees every step, and
// the decision and execution histograms take theirs.
func (m *opsMetrics) stages(next func(string, time.Duration)) func(string, time.Duration) {
	return func(name string, d time.Duration) {
		switch name {
		case "permission":
			m.decision.Observe(d.Seconds())
		case "execute":
			m.execution.Observe(d.Seconds())
		}
		next(name, d)
	}
}

// recorder returns r with every call's end counted: how it was confined and how it ended
// is known only there.
func (m *opsMetrics) recorder(r executor.Recorder) executor.Recorder {
	return countingRecorder{next: r, m: m}
}

type countingRecorder struct {
	next executor.Recorder
	m    *opsMetrics
}

// RecordCall implements executor.Recorder.
func (r countingRecorder) RecordCall(ctx context.Context, kind string, cr *executor.CallRecord) error {
	if kind == executor.KindEnd && cr.Outcome != nil {
		r.m.outcome(cr.Outcome)
	}
	return r.next.RecordCall(ctx, kind, cr)
}

func (m *opsMetrics) outcome(o *executor.Outcome) {
	if o.Err != nil && o.Err.Code == errcode.SandboxSetup {
		m.setupFailures.WithLabelValues(setupClass(o.Err)).Inc()
	}
	if o.Result == nil {
		return
	}
	d := o.Result.Data
	// killed_by, not timed_out: a Bash call past its timeout that moved to the background
	// says timed_out but was not killed.
	if by, _ := d["killed_by"].(string); by == "timeout" {
		m.kills.WithLabelValues("timeout").Inc()
	}
	if oom, _ := d["oom_killed"].(bool); oom {
		m.kills.WithLabelValues("oom").Inc()
	}
	if pids, _ := d["pids_limited"].(bool); pids {
		m.kills.WithLabelValues("pids").Inc()
	}
}

// setupClass is the label of a setup failure: the child's step, or parent.
func setupClass(err error) string {
	var ie *sandbox.InitError
	if !errors.As(err, &ie) {
		return "parent"
	}
	// The report is "step: detail", and a step may carry words ("landlock open",
	// "mount (a symlink replaced a planned path)"): the first word names the class.
	step, _, _ := strings.Cut(ie.Step, ":")
	step, _, _ = strings.Cut(step, " ")
	if setupClasses[step] {
		return step
	}
	return "other"
}
