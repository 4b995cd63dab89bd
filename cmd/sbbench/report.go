package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// Row is one figure with the baseline it is measured against in the same run.
type Row struct {
	Section      string  `json:"section"`
	Name         string  `json:"name"`
	Value        float64 `json:"value"`
	Unit         string  `json:"unit"`
	Baseline     float64 `json:"baseline"`
	BaselineName string  `json:"baseline_name"`
	Ratio        float64 `json:"ratio"`
	Note         string  `json:"note,omitempty"`
}

// Report is the whole run, as --json writes it for comparison with later runs.
type Report struct {
	Time     time.Time `json:"time"`
	Quick    bool      `json:"quick"`
	CPUs     int       `json:"cpus"`
	Kernel   string    `json:"kernel"`
	Rows     []Row     `json:"rows"`
	Errors   []string  `json:"errors,omitempty"`
	Duration string    `json:"duration"`
}

func (r *Report) add(row Row) {
	if row.Baseline != 0 {
		row.Ratio = row.Value / row.Baseline
	}
	r.Rows = append(r.Rows, row)
}

// print writes `name: value unit (baseline: value, ratio: x)` rows, a header per section.
func (r *Report) print(w io.Writer) {
	section := ""
	for _, row := range r.Rows {
		if row.Section != section {
			section = row.Section
			fmt.Fprintf(w, "\n# %s\n", section)
		}
		fmt.Fprintf(w, "%s: %s %s (baseline: %s %s %s, ratio: %.2fx)", row.Name, num(row.Value), row.Unit,
			num(row.Baseline), row.Unit, row.BaselineName, row.Ratio)
		if row.Note != "" {
			fmt.Fprintf(w, "  [%s]", row.Note)
		}
		fmt.Fprintln(w)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "ERROR: %s\n", e)
	}
}

func (r *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// lat is a latency sample set.
type lat []time.Duration

func (l lat) sorted() lat {
	s := append(lat(nil), l...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s
}

// q is the q-quantile of a sorted sample (nearest rank).
func (l lat) q(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(l)))) - 1
	return l[max(0, min(i, len(l)-1))]
}

func (l lat) mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return sum / time.Duration(len(l))
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// measure runs f n times after warm unmeasured runs and returns the sorted latencies.
func measure(warm, n int, f func(i int) error) (lat, error) {
	for i := 0; i < warm; i++ {
		if err := f(i); err != nil {
			return nil, err
		}
	}
	out := make(lat, n)
	for i := 0; i < n; i++ {
		s := time.Now()
		if err := f(i); err != nil {
			return nil, err
		}
		out[i] = time.Since(s)
	}
	return out.sorted(), nil
}

// measurePaced runs each of fs once per round, n rounds after warm unmeasured ones, each run
// after an untimed pause, and returns each f's sorted latencies. Interleaving puts the same
// drift of a noisy machine on every f; the pause is the think time between an agent's calls,
// in which the daemon gets ready for the next one (its pooled inits refill). Each round starts
// one f further on, so no f is always measured right after the same one: what ran just before
// a command (its caches, its kernel work) moved the command's figure by up to 7% here.
func measurePaced(warm, n int, pause time.Duration, fs ...func(i int) error) ([]lat, error) {
	out := make([]lat, len(fs))
	for j := range fs {
		out[j] = make(lat, 0, n)
	}
	for i := 0; i < warm+n; i++ {
		for k := range fs {
			j := (i + k) % len(fs)
			f := fs[j]
			time.Sleep(pause)
			s := time.Now()
			if err := f(i); err != nil {
				return nil, err
			}
			if i >= warm {
				out[j] = append(out[j], time.Since(s))
			}
		}
	}
	for j := range out {
		out[j] = out[j].sorted()
	}
	return out, nil
}

// quantile names a quantile of a latency sample.
type quantile struct {
	name string
	q    float64
}

// p50p99 are the quantiles every latency row reports.
var p50p99 = []quantile{{"p50", 0.5}, {"p99", 0.99}}
