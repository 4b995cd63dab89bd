package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// BenchmarkHook measures what an agent configured with `sbctl hook --confine` pays per tool
// call, as ratios to a bare fork/exec of /bin/true measured in the same loop (the order
// rotated each round, so drift of the machine lands on every row alike):
//
//	hook_x:    `sbctl hook` from process start to its JSON out (goal ≤ 4x)
//	run_x:     the rewritten command (`bash -c '<sbctl bash … --command-file F>'`) running /bin/true
//	confine_x: hook --confine, then the rewritten command: a confined /bin/true end to end (goal ≤ 6x)
//
// Run: go test -run '^$' -bench Hook -benchtime 60x ./cmd/sbctl/
func BenchmarkHook(b *testing.B) {
	bs := buildBins(b)
	d := startDaemon(b, bs, "")
	rt, err := os.MkdirTemp("/var/tmp", "sbctl-bench-rt-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(rt)
	in, _ := json.Marshal(map[string]any{"session_id": "bench", "cwd": d.dir, "hook_event_name": "PreToolUse",
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "/bin/true"}})
	env := []string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + rt, "HOME=" + rt}
	hook := func(confine bool) []byte {
		args := []string{"--socket", d.socket, "hook"}
		if confine {
			args = append(args, "--confine")
		}
		cmd := exec.Command(bs.sbctl, args...)
		cmd.Env = env
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("hook: %v", err)
		}
		return out
	}
	rewritten := func(out []byte) string {
		var a hookAnswer
		if err := json.Unmarshal(out, &a); err != nil || a.HookSpecificOutput.PermissionDecision != "allow" {
			b.Fatalf("hook said %s (%v)", out, err)
		}
		c, _ := a.HookSpecificOutput.UpdatedInput["command"].(string)
		return c
	}
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s: %v: %s", name, err, out)
		}
	}
	// Warm up: the session, the daemon's pool, the page cache.
	for range 5 {
		run("bash", "-c", rewritten(hook(true)))
	}
	var bare, hk, rn, e2e []time.Duration
	steps := []func(){
		func() { t := time.Now(); run("/bin/true"); bare = append(bare, time.Since(t)) },
		func() { t := time.Now(); hook(false); hk = append(hk, time.Since(t)) },
		func() {
			// The run alone: the hook's part measured apart, outside the timing.
			c := rewritten(hook(true))
			t := time.Now()
			run("bash", "-c", c)
			rn = append(rn, time.Since(t))
		},
		func() { t := time.Now(); run("bash", "-c", rewritten(hook(true))); e2e = append(e2e, time.Since(t)) },
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range steps {
			steps[(i+j)%len(steps)]()
			// Calls come apart in an agent, not back to back.
			time.Sleep(5 * time.Millisecond)
		}
	}
	b.StopTimer()
	med := func(ds []time.Duration) float64 {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	base := med(bare)
	b.ReportMetric(base, "bare_ms")
	b.ReportMetric(med(hk), "hook_ms")
	b.ReportMetric(med(rn), "run_ms")
	b.ReportMetric(med(e2e), "confine_ms")
	b.ReportMetric(med(hk)/base, "hook_x")
	b.ReportMetric(med(rn)/base, "run_x")
	b.ReportMetric(med(e2e)/base, "confine_x")
}
