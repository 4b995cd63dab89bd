package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/internal/harness"
	"github.com/sandboxd/sandboxd/protocol"
)

func bashReq(id, cmd string) protocol.CallRequest {
	return protocol.CallRequest{Tool: "Bash", ToolUseID: id, Input: harness.Input(map[string]any{"command": cmd})}
}

// hammer runs call(w, i) in a loop on each of n workers until stop is closed or call says
// false; wg is done when every worker has returned.
func hammer(n int, call func(w, i int) bool) (stop chan struct{}, wg *sync.WaitGroup) {
	stop, wg = make(chan struct{}), &sync.WaitGroup{}
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if !call(w, i) {
					return
				}
			}
		}()
	}
	return stop, wg
}

func text(r *protocol.CallResult) string {
	if r == nil {
		return "(no result)"
	}
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	if r.Error != nil {
		b.WriteString(" [" + r.Error.Class + ": " + r.Error.Message + "]")
	}
	return b.String()
}

// TestKill9UnderLoad crashes the daemon while calls run, restarts it on the same state, and
// checks that nothing was lost: the chain verifies, every result a client saw has its
// call.end, and the crashed daemon's children and cgroups are reaped at start.
func TestKill9UnderLoad(t *testing.T) {
	d := start(t, nil)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: workDir(t, d), Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var n atomic.Int64
	stop, wg := hammer(6, func(w, i int) bool {
		id := fmt.Sprintf("k9_%d_%d", w, i)
		cmd := "true"
		if w == 0 {
			cmd = "sleep 20" // still running when the daemon dies
		}
		res, err := c.Call(ctx, s.ID, bashReq(id, cmd))
		if err != nil {
			return false // the daemon is gone
		}
		if res.ToolUseID == id {
			mu.Lock()
			seen[id] = true
			mu.Unlock()
			n.Add(1)
		}
		return true
	})
	waitFor(10*time.Second, func() bool { return n.Load() >= 20 })
	var sleepers []int
	waitFor(5*time.Second, func() bool {
		sleepers = nil
		for _, p := range d.SubtreeProcs() {
			if harness.ProcComm(p) == "sleep" {
				sleepers = append(sleepers, p)
			}
		}
		return len(sleepers) > 0
	})
	if len(sleepers) == 0 {
		t.Fatal("the long call never started in the daemon's cgroup subtree")
	}
	if err := d.Kill(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	t.Logf("killed with %d results seen; children left by the crash: %v", n.Load(), d.SubtreeProcs())

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.Restart(rctx); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	for _, p := range sleepers {
		if harness.ProcComm(p) == "sleep" {
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p))
			t.Errorf("pid %d (sleep of the crashed daemon's call) still runs after the restart; its cgroups:\n%s", p, cg)
		}
	}
	if left := d.SubtreeProcs(); len(left) > 0 {
		t.Errorf("processes in the cgroup subtree after the restart: %v", left)
	}
	if cgs := d.SubtreeCgroups(); len(cgs) > 0 {
		t.Errorf("cgroups of the crashed daemon not reaped at start: %v", cgs)
	}
	// The restarted daemon serves.
	s2, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: workDir(t, d), Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Call(ctx, s2.ID, bashReq("k9_after", "echo ok")); err != nil || res.IsError {
		t.Fatalf("call after restart: %v %s", err, text(res))
	}
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	// And once more after a clean stop, which the next start must not call unclean.
	if err := d.Restart(rctx); err != nil {
		t.Fatalf("restart after a clean stop: %v", err)
	}
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	rep, err := d.VerifyAudit()
	if err != nil {
		t.Fatalf("audit verify after kill -9 and restart: %v (report %+v)", err, rep)
	}
	t.Logf("audit: %d records, %d torn tails recovered", rep.Records, rep.TornTails)
	recs, err := d.Records()
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]bool{}
	var starts []*audit.Record
	for _, r := range recs {
		switch r.Kind {
		case audit.KindCallEnd:
			ends[r.ToolUseID] = true
		case audit.KindDaemonStart:
			starts = append(starts, r)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id := range seen {
		if !ends[id] {
			t.Errorf("the client saw the result of %s but the audit log has no call.end for it", id)
		}
	}
	checkStartsAfterKill(t, starts, ends)
}

// TestKill9SweepsWhatATaskMade: a background task makes a protected path (an .envrc, which
// direnv runs when the user next enters the dir) a second in, past its first sweep (which
// journals it), and the daemon is killed before the next sweep saw it: the next daemon sweeps after the task from its journal before it serves,
// moves the file aside, and its daemon.start says so.
func TestKill9SweepsWhatATaskMade(t *testing.T) {
	d := start(t, nil)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	work := workDir(t, d)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	req := protocol.CallRequest{Tool: "Bash", ToolUseID: "k9_task", Input: harness.Input(map[string]any{
		"command": "sleep 1; f=.env; echo 'echo pwned' > ${f}rc; sleep 60", "run_in_background": true})}
	if res, err := c.Call(ctx, s.ID, req); err != nil || res.IsError {
		t.Fatalf("background task: %v %s", err, text(res))
	}
	envrc := filepath.Join(work, ".envrc")
	if !waitFor(10*time.Second, func() bool { _, err := os.Lstat(envrc); return err == nil }) {
		t.Fatal("the task never made .envrc")
	}
	if err := d.Kill(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := d.Restart(rctx); err != nil {
		t.Fatalf("restart after kill -9: %v", err)
	}
	if _, err := os.Lstat(envrc); err == nil {
		b, _ := os.ReadFile(envrc)
		t.Errorf("the .envrc the task made (%q) is still there after the restart", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.StateDir, "sweeps")); len(ents) != 0 {
		t.Errorf("sweep journals left after the restart: %v", ents)
	}
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	recs, err := d.Records()
	if err != nil {
		t.Fatal(err)
	}
	var last *audit.Record
	for _, r := range recs {
		if r.Kind == audit.KindDaemonStart {
			last = r
		}
	}
	if last == nil || last.Detail["unfinished_tasks"] != "1" {
		t.Errorf("daemon.start after the kill: %+v, want the task named unfinished", last)
	}
	// Moved by the restart's sweep, unless the task's own sweep won the race to it.
	t.Logf("daemon.start: recovered_moved_aside=%s %s", last.Detail["recovered_moved_aside"], last.Detail["recovered_moved_aside_paths"])
}

// checkStartsAfterKill: of three daemon.start records (first start, after kill -9, after a
// clean stop) only the second says the previous daemon stopped uncleanly, and it names the
// calls still running at the kill (the sleeps of worker 0), whose call.end never came.
func checkStartsAfterKill(t *testing.T, starts []*audit.Record, ends map[string]bool) {
	t.Helper()
	if len(starts) != 3 {
		t.Fatalf("want 3 daemon.start records, got %d", len(starts))
	}
	for i, r := range starts {
		if got := r.Detail["previous_stop"]; (i == 1) != (got == "unclean") {
			t.Errorf("daemon.start %d: previous_stop %q (details %v)", i+1, got, r.Detail)
		}
	}
	d := starts[1].Detail
	ids := strings.Split(d["unfinished_call_ids"], ",")
	if d["unfinished_calls"] != strconv.Itoa(len(ids)) || d["unfinished_call_ids"] == "" {
		t.Fatalf("after kill -9: unfinished calls %q, ids %q", d["unfinished_calls"], d["unfinished_call_ids"])
	}
	sleeper := false
	for _, id := range ids {
		if ends[id] {
			t.Errorf("%s is named unfinished but has a call.end", id)
		}
		sleeper = sleeper || strings.HasPrefix(id, "k9_0_")
	}
	if !sleeper {
		t.Errorf("the running sleep is not among the unfinished calls %v", ids)
	}
}

// TestClientDisconnectCancels: a client that gives up mid-call cancels the call, and the
// call's cgroup is killed with everything in it.
func TestClientDisconnectCancels(t *testing.T) {
	d := start(t, nil)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: workDir(t, d), Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	short := d.Client(time.Second)
	t0 := time.Now()
	_, err = short.Call(ctx, s.ID, bashReq("dc_sleep", "sleep 30"))
	if !client.NoAnswer(err) {
		t.Fatalf("the 1 s client got an answer to sleep 30: %v", err)
	}
	sleeping := func() []int {
		var out []int
		for _, p := range d.SubtreeProcs() {
			if harness.ProcComm(p) == "sleep" {
				out = append(out, p)
			}
		}
		return out
	}
	if !waitFor(5*time.Second, func() bool { return len(sleeping()) == 0 }) {
		t.Fatalf("sleep 30 still runs %s after its client disconnected: %v", time.Since(t0).Round(time.Millisecond), sleeping())
	}
	// Only the session's worker may remain: the call's own cgroup is gone.
	if !waitFor(5*time.Second, func() bool {
		for _, cg := range d.SubtreeCgroups() {
			if strings.Count(cg, "/") == 1 && filepath.Base(cg) != "worker" && !d.HoldsWorker(cg) {
				return false
			}
		}
		return true
	}) {
		t.Errorf("the cancelled call's cgroup is left: %v", d.SubtreeCgroups())
	}
	var end *audit.Record
	waitFor(5*time.Second, func() bool {
		recs, _ := d.Records()
		for _, r := range recs {
			if r.Kind == audit.KindCallEnd && r.ToolUseID == "dc_sleep" {
				end = r
			}
		}
		return end != nil
	})
	if end == nil {
		t.Fatal("no call.end for the cancelled call")
	}
	if end.Outcome == nil || end.Outcome.DurationMS >= 10_000 {
		t.Errorf("call.end outcome %+v: the call was not cut short", end.Outcome)
	}
	t.Logf("call.end after disconnect: %+v", *end.Outcome)
	if res, err := c.Call(ctx, s.ID, bashReq("dc_after", "echo ok")); err != nil || res.IsError {
		t.Fatalf("session unusable after the disconnect: %v %s", err, text(res))
	}
}

// TestSlowStreamReader: one client reads a large ndjson stream slowly; others are served
// promptly and the daemon's memory stays bounded (output is streamed, not buffered).
func TestSlowStreamReader(t *testing.T) {
	d := start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := d.Client(30 * time.Second)
	work := workDir(t, d)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := d.RSS()
	if err != nil {
		t.Fatal(err)
	}
	body := json.RawMessage(`{"tool":"Bash","tool_use_id":"slow_stream","input":{"command":"yes 0123456789abcdef0123456789abcdef | head -c 100000000"}}`)
	slow := d.Client(0)
	resp, err := slow.Open(ctx, client.MethodPost, "/v1/sessions/"+s.ID+"/calls", body, "application/x-ndjson")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.ContentType, "ndjson") {
		t.Fatalf("HTTP %d, content type %q", resp.StatusCode, resp.ContentType)
	}
	var read atomic.Int64
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		buf := make([]byte, 512)
		for {
			n, err := resp.Body.Read(buf)
			read.Add(int64(n))
			if err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond) // ~25 KB/s
		}
	}()
	other, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(work, "small.txt")
	if err := os.WriteFile(f, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var worst time.Duration
	var peak int64
	for i := 0; i < 25; i++ {
		t0 := time.Now()
		if _, err := c.Health(ctx); err != nil {
			t.Fatalf("healthz during the slow stream: %v", err)
		}
		res, err := c.Call(ctx, other.ID, protocol.CallRequest{Tool: "Read", Input: harness.Input(map[string]any{"file_path": f})})
		if err != nil || res.IsError {
			t.Fatalf("read during the slow stream: %v %s", err, text(res))
		}
		worst = max(worst, time.Since(t0))
		if r, err := d.RSS(); err == nil {
			peak = max(peak, r)
		}
		time.Sleep(150 * time.Millisecond)
	}
	t.Logf("slow reader got %d bytes; other clients' worst healthz+Read %v; RSS idle %d MiB, peak %d MiB",
		read.Load(), worst, idle>>20, peak>>20)
	if worst > 2*time.Second {
		t.Errorf("other clients waited %v during the slow stream", worst)
	}
	if peak-idle > 150<<20 {
		t.Errorf("daemon RSS grew by %d MiB while a client read slowly: output is buffered, not streamed", (peak-idle)>>20)
	}
	cancel()
	<-readerDone
}

// TestDiskFull: with the state directory's filesystem full, calls are refused with
// audit_unavailable, healthz answers, and the daemon recovers once space is freed.
func TestDiskFull(t *testing.T) {
	d, state := smallStateDaemon(t)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: workDir(t, d), Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Call(ctx, s.ID, bashReq("df_before", "true")); err != nil || res.IsError {
		t.Fatalf("call before the disk filled: %v %s", err, text(res))
	}
	filler := filepath.Join(state, "filler")
	out, _ := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").CombinedOutput()
	if !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd did not fill the state dir: %s", out)
	}
	var res protocol.CallResult
	var status int
	for i := 0; i < 20; i++ {
		res = protocol.CallResult{}
		status, err = c.Send(ctx, client.MethodPost, "/v1/sessions/"+s.ID+"/calls", bashReq(fmt.Sprintf("df_full_%d", i), "true"), &res)
		if status == http.StatusServiceUnavailable {
			break
		}
	}
	// The refusal is a call result carrying the error, or a bare error answer.
	class := ""
	var ae *client.APIError
	if errors.As(err, &ae) {
		class = ae.Detail.Class
	} else if err == nil && res.Error != nil {
		class = res.Error.Class
	}
	if status != http.StatusServiceUnavailable || class != "audit_unavailable" {
		t.Fatalf("call with the disk full: status %d err %v result %s; want 503 audit_unavailable", status, err, text(&res))
	}
	if res.Decision != nil && res.IsError == false {
		t.Errorf("refused call reported success: %+v", res)
	}
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatalf("healthz with the disk full: %v", err)
	}
	if h.Status != "degraded" {
		t.Errorf("healthz status %q with the audit log unwritable, want degraded", h.Status)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var after *protocol.CallResult
	ok := waitFor(15*time.Second, func() bool {
		after, err = c.Call(ctx, s.ID, bashReq(fmt.Sprintf("df_after_%d", time.Now().UnixNano()), "true"))
		return err == nil && !after.IsError
	})
	if !ok {
		t.Fatalf("no recovery 15 s after freeing space: %v %s", err, text(after))
	}
	if h, err := c.Health(ctx); err != nil || h.Status != "ok" {
		t.Errorf("healthz after recovery: %+v %v", h, err)
	}
	if err := d.Stop(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if rep, err := d.VerifyAudit(); err != nil {
		t.Errorf("audit verify after the disk-full episode: %v (report %+v)", err, rep)
	}
}

// smallStateDaemon starts a daemon whose state dir is an 8 MiB tmpfs of its own, with the
// free-space floor (256 MiB by default) scaled down to it, so a test sees the volume fill,
// and the floor refuse, before the write itself fails.
func smallStateDaemon(t *testing.T) (*harness.Daemon, string) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o711); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m,mode=0711", "tmpfs", state).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for the state dir: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", state).Run() })
	return startWith(t, harness.Options{Dir: dir, StateDir: state, ConfigYAML: harness.DefaultConfig(dir) + "audit:\n  min_free_bytes: 1048576\n"}), state
}

// startWith is start with explicit options (Bin is filled in).
func startWith(t *testing.T, o harness.Options) *harness.Daemon {
	t.Helper()
	o.Bin = daemonBin
	if o.ConfigYAML == "" {
		o.ConfigYAML = harness.DefaultConfig(o.Dir)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := os.Chmod(filepath.Dir(o.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := harness.Start(ctx, o)
	if err != nil {
		t.Fatalf("start daemon: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log tail:\n%s", d.LogTail(3000))
		}
		d.Close()
	})
	return d
}

// TestHungHook: a PreToolUse hook that never returns is cut at its timeout and the call is
// denied with the reason; other calls keep being served meanwhile.
func TestHungHook(t *testing.T) {
	d := start(t, func(string) string {
		return "hooks:\n  PreToolUse:\n  - matcher: Bash\n    hooks:\n    - type: command\n      command: sleep 600\n      timeout: 1\n"
	})
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	work := workDir(t, d)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions"})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(work, "f.txt")
	if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type out struct {
		res *protocol.CallResult
		err error
		dur time.Duration
	}
	hung := make(chan out, 1)
	go func() {
		t0 := time.Now()
		res, err := c.Call(ctx, s.ID, bashReq("hook_hung", "echo should-not-run"))
		hung <- out{res, err, time.Since(t0)}
	}()
	// Meanwhile, calls the hook does not match are served.
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		res, err := c.Call(ctx, s.ID, protocol.CallRequest{Tool: "Read", Input: harness.Input(map[string]any{"file_path": f})})
		if err != nil || res.IsError || time.Since(t0) > time.Second {
			t.Fatalf("Read while a hook hangs: %v %s (%v)", err, text(res), time.Since(t0))
		}
	}
	o := <-hung
	if o.err != nil || o.res == nil {
		t.Fatalf("hung-hook call: %v", o.err)
	}
	if o.dur > 10*time.Second {
		t.Errorf("the call took %v: the hook's 1 s timeout was not applied", o.dur)
	}
	if o.res.Decision == nil || o.res.Decision.Behavior != "deny" || !o.res.IsError {
		t.Fatalf("hung hook: decision %+v is_error %v, want deny: %s", o.res.Decision, o.res.IsError, text(o.res))
	}
	reason := strings.ToLower(o.res.Decision.Reason + " " + text(o.res))
	if !strings.Contains(reason, "hook") || !(strings.Contains(reason, "timed out") || strings.Contains(reason, "timeout")) {
		t.Errorf("deny reason does not say the hook timed out: %q", reason)
	}
	if strings.Contains(text(o.res), "should-not-run") {
		t.Error("the command ran despite the hook")
	}
	if _, err := c.Health(ctx); err != nil {
		t.Fatalf("healthz after the hung hook: %v", err)
	}
	// No hook process is left behind.
	if !waitFor(5*time.Second, func() bool {
		for _, p := range d.SubtreeProcs() {
			if harness.ProcComm(p) == "sleep" {
				return false
			}
		}
		return true
	}) {
		t.Error("the hung hook's sleep 600 still runs after its timeout")
	}
}

// TestReloadUnderLoad: SIGHUP while calls run fails none of them.
func TestReloadUnderLoad(t *testing.T) {
	d := start(t, nil)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	work := workDir(t, d)
	f := filepath.Join(work, "f.txt")
	if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var sids []string
	for i := 0; i < 4; i++ {
		s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions"})
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, s.ID)
	}
	var calls, failed atomic.Int64
	var firstFail atomic.Value
	stop, wg := hammer(8, func(w, i int) bool {
		req := bashReq(fmt.Sprintf("hup_%d_%d", w, i), "echo hi")
		if i%2 == 0 {
			req = protocol.CallRequest{Tool: "Read", Input: harness.Input(map[string]any{"file_path": f})}
		}
		res, err := c.Call(ctx, sids[w%len(sids)], req)
		calls.Add(1)
		if err != nil || res.IsError {
			failed.Add(1)
			firstFail.CompareAndSwap(nil, fmt.Sprintf("%v %s", err, text(res)))
		}
		return true
	})
	for i := 0; i < 15; i++ {
		time.Sleep(150 * time.Millisecond)
		if err := d.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d calls across 15 reloads, %d failed", calls.Load(), failed.Load())
	if calls.Load() < 20 {
		t.Errorf("only %d calls ran during the reloads", calls.Load())
	}
	if failed.Load() > 0 {
		t.Errorf("%d calls failed during SIGHUP reloads; first: %v", failed.Load(), firstFail.Load())
	}
	if !d.Running() {
		t.Fatalf("daemon exited on SIGHUP: %s", d.LogTail(2000))
	}
}

// TestRememberNeedsItsRecord: an approval remembered in a settings file whose answer the log
// cannot record (the disk is full) leaves no rule behind: the file is as it was, and the
// command still asks once space is back.
func TestRememberNeedsItsRecord(t *testing.T) {
	d, state := smallStateDaemon(t)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	work := workDir(t, d)
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "default", TrustProject: true})
	if err != nil {
		t.Fatal(err)
	}
	var spare []string
	for i := range 40 {
		r, err := c.Call(ctx, s.ID, bashReq(fmt.Sprint("spare", i), fmt.Sprintf("touch spare%d", i)))
		if err != nil || r.ApprovalID == "" {
			t.Fatalf("not asked: %v %+v", err, r)
		}
		spare = append(spare, r.ApprovalID)
	}
	res, err := c.Call(ctx, s.ID, bashReq("ask", "touch remembered"))
	if err != nil || res.Decision == nil || res.Decision.Behavior != protocol.Ask || res.ApprovalID == "" {
		t.Fatalf("not asked: %v %+v", err, res)
	}
	filler := filepath.Join(state, "filler")
	if out, _ := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").CombinedOutput(); !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd did not fill the state dir: %s", out)
	}
	// The log's last page may still hold a few records: answered until one is refused.
	full := false
	for _, id := range spare {
		if _, err := c.AnswerApproval(ctx, id, protocol.ApprovalAnswer{Answer: protocol.Deny}); err != nil {
			full = true
			break
		}
	}
	if !full {
		t.Fatal("the log took every answer on a full disk")
	}
	if _, err := c.AnswerApproval(ctx, res.ApprovalID, protocol.ApprovalAnswer{Answer: protocol.Allow, Remember: "localSettings"}); err == nil {
		t.Fatal("an answer the log could not record was taken")
	}
	settings := filepath.Join(work, ".sandboxd", "settings.local.json")
	if b, err := os.ReadFile(settings); err == nil && strings.Contains(string(b), "touch") {
		t.Errorf("the remembered rule stayed in %s: %s", settings, b)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	var again *protocol.CallResult
	if !waitFor(15*time.Second, func() bool {
		again, err = c.Decide(ctx, s.ID, bashReq("again", "touch remembered"))
		return err == nil
	}) {
		t.Fatalf("no decision after freeing space: %v", err)
	}
	if again.Decision == nil || again.Decision.Behavior != protocol.Ask {
		t.Errorf("after the unrecorded remember: %+v", again.Decision)
	}
}

// TestContextChangeNeedsItsRecord: a persisted cd whose call.end the log cannot write (the
// disk filled while it ran) does not move the session: no later call runs where no record
// says it moved.
func TestContextChangeNeedsItsRecord(t *testing.T) {
	d, state := smallStateDaemon(t)
	ctx := context.Background()
	c := d.Client(30 * time.Second)
	work := workDir(t, d)
	if err := os.Mkdir(filepath.Join(work, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions", PersistCwd: true})
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(state, "filler")
	go func() {
		time.Sleep(time.Second)
		_ = exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=4k").Run()
	}()
	res, err := c.Call(ctx, s.ID, bashReq("cd", "cd sub && sleep 3"))
	if err != nil {
		t.Fatalf("the cd call: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	got, err := c.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Cwd != work {
		t.Errorf("the session moved to %s with its call.end unwritten (result %s)", got.Cwd, text(res))
	}
}
