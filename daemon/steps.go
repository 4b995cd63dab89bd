package daemon

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stepTimes are where a call's time goes, for admins and the benchmark's breakdown: each step
// of the pipeline, and each step of a confined start and of a call's end.
type stepTimes struct {
	stages, spawn stepHistograms
}

// stepHistograms is one histogram vector with its children made once by name: WithLabelValues
// hashes on every call, and a key made by concatenation allocated on every one.
type stepHistograms struct {
	vec   *prometheus.HistogramVec
	cache *sync.Map // name -> prometheus.Observer
}

func (h stepHistograms) observe(name string, d time.Duration) {
	o, ok := h.cache.Load(name)
	if !ok {
		o, _ = h.cache.LoadOrStore(name, h.vec.WithLabelValues(name))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

func newStepTimes(reg prometheus.Registerer) *stepTimes {
	buckets := prometheus.ExponentialBuckets(5e-6, 2, 16) // 5 µs .. 164 ms
	stages := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandboxd_call_stage_seconds",
		Help:    "Time each call spent in each step of the pipeline (lookup, schema, permission, execute, finish, ...).",
		Buckets: buckets,
	}, []string{"stage"})
	spawn := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sandboxd_spawn_step_seconds",
		Help:    "Time each confined start and each call's end spent in each step (plan, handover, child_setup_exec, cgroup_create, ...).",
		Buckets: buckets,
	}, []string{"step"})
	reg.MustRegister(stages, spawn)
	return &stepTimes{stages: stepHistograms{stages, &sync.Map{}}, spawn: stepHistograms{spawn, &sync.Map{}}}
}
func (t *stepTimes) stage(name string, d time.Duration) { t.stages.observe(name, d) }

func (t *stepTimes) spawnStep(name string, d time.Duration) { t.spawn.observe(name, d) }
