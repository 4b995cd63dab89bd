package daemon

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stepTimes are where a call's time goes, for admins and the benchmark's breakdown: each step
// of the pipeline, and each step of a confined start and of a call's end.
type stepTimes struct {
	stages, spawn *prometheus.HistogramVec
	cache         sync.Map // "stage\x00name" or "spawn\x00name" -> prometheus.Observer
}

func newStepTimes(reg prometheus.Registerer) *stepTimes {
	buckets := prometheus.ExponentialBuckets(5e-6, 2, 16) // 5 µs .. 164 ms
	t := &stepTimes{
		stages: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxd_call_stage_seconds",
			Help:    "Time each call spent in each step of the pipeline (lookup, schema, permission, execute, finish, ...).",
			Buckets: buckets,
		}, []string{"stage"}),
		spawn: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sandboxd_spawn_step_seconds",
			Help:    "Time each confined start and each call's end spent in each step (plan, handover, child_setup_exec, cgroup_create, ...).",
			Buckets: buckets,
		}, []string{"step"}),
	}
	reg.MustRegister(t.stages, t.spawn)
	return t
}

// observer returns the histogram for name, made once: WithLabelValues hashes on every call.
func (t *stepTimes) observer(vec *prometheus.HistogramVec, kind, name string) prometheus.Observer {
	key := kind + "\x00" + name
	if o, ok := t.cache.Load(key); ok {
		return o.(prometheus.Observer)
	}
	o, _ := t.cache.LoadOrStore(key, vec.WithLabelValues(name))
	return o.(prometheus.Observer)
}

func (t *stepTimes) stage(name string, d time.Duration) {
	t.observer(t.stages, "stage", name).Observe(d.Seconds())
}

func (t *stepTimes) spawnStep(name string, d time.Duration) {
	t.observer(t.spawn, "spawn", name).Observe(d.Seconds())
}
