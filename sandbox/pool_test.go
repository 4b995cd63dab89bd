package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/cgroupfs"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"golang.org/x/sys/unix"
)

// waitPoolReady waits until the pool has n ready inits.
func waitPoolReady(t testing.TB, s *Sandbox, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.pool.mu.Lock()
		k := len(s.pool.ready)
		s.pool.mu.Unlock()
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool has %d ready inits after 10 s, want %d", k, n)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// readyInits snapshots the pool's ready inits.
func readyInits(s *Sandbox) []*poolInit {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	return append([]*poolInit(nil), s.pool.ready...)
}

func alive(pid int) bool {
	// A zombie is dead for our purpose: its /proc/<pid>/stat state is Z.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] != 'Z'
}

// TestPoolEscape runs the whole escape suite again, each case handed to a pooled init: a call
// from the pool is confined exactly as one started for itself (TestEscape).
func TestPoolEscape(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	e := newEscapeEnv(t)
	// One at a time: each waits for a ready init and must get one.
	for i, tc := range escapeCases() {
		t.Run(tc.name, func(t *testing.T) {
			runEscapeCase(t, s, e, i, tc, true)
		})
	}
}

// TestPoolLimits: a pooled cgroup gets its call's limits, up or down from the defaults it was
// made with, before the call runs.
func TestPoolLimits(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	if s.cg.v2 {
		t.Skip("reads the v1 limit files")
	}
	for _, lim := range []Limits{
		{MemoryMaxBytes: 4 << 30, PidsMax: 1000, CPUQuotaMilli: 1500}, // raised
		{MemoryMaxBytes: 64 << 20, PidsMax: 16, CPUQuotaMilli: 250},   // lowered
		{}, // the defaults: nothing to write
	} {
		waitPoolReady(t, s, 1)
		spec := sleepSpec(fmt.Sprintf("lim%d", lim.PidsMax))
		spec.Limits = lim
		p, err := s.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		want := lim.merge(s.limits)
		got := map[string]string{}
		for file, dir := range map[string]string{"memory.limit_in_bytes": "memory", "memory.memsw.limit_in_bytes": "memory",
			"pids.max": "pids", "cpu.cfs_quota_us": "cpu"} {
			b, err := os.ReadFile(filepath.Join(p.cg.dirs[dir], file))
			if err == nil {
				got[file] = strings.TrimSpace(string(b))
			}
		}
		p.Kill("test")
		p.Wait()
		if !p.pooled {
			t.Fatal("not pooled")
		}
		mem := strconv.FormatInt(want.MemoryMaxBytes, 10)
		if got["memory.limit_in_bytes"] != mem || (got["memory.memsw.limit_in_bytes"] != "" && got["memory.memsw.limit_in_bytes"] != mem) ||
			got["pids.max"] != strconv.FormatInt(want.PidsMax, 10) || got["cpu.cfs_quota_us"] != strconv.FormatInt(want.CPUQuotaMilli*100, 10) {
			t.Errorf("limits %+v: cgroup has %v", want, got)
		}
	}
}

// TestPoolFallback: with no ready init, or only a dead one, Start takes the per-call path at
// once, and the pool refills for the next call.
func TestPoolFallback(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	waitPoolReady(t, s, poolMin)

	t.Run("dead init", func(t *testing.T) {
		// Another daemon's start-up reaping, the OOM killer: an idle init can die.
		// Dead, not dying: one killed during its hand-over would report the call killed.
		deadline := time.Now().Add(5 * time.Second)
		for _, in := range readyInits(s) {
			syscall.Kill(in.cmd.Process.Pid, syscall.SIGKILL)
			for alive(in.cmd.Process.Pid) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		res, out, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/echo", Args: []string{"hi"},
			UID: nobody, GID: nobody, Dir: "/", Session: "fb", Call: "dead"})
		if err != nil || res.ExitCode != 0 || out != "hi\n" {
			t.Fatalf("res=%+v out=%q err=%v", res, out, err)
		}
		if p.pooled {
			t.Fatal("ran in a dead pooled init")
		}
	})

	t.Run("empty pool", func(t *testing.T) {
		waitPoolReady(t, s, poolMin)
		s.pool.mu.Lock()
		taken := s.pool.ready
		s.pool.ready, s.pool.target = nil, 0
		s.pool.mu.Unlock()
		for _, in := range taken {
			s.discard(in)
		}
		t0 := time.Now()
		res, _, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/true",
			UID: nobody, GID: nobody, Dir: "/", Session: "fb", Call: "empty"})
		if err != nil || res.ExitCode != 0 || p.pooled {
			t.Fatalf("res=%+v pooled=%v err=%v", res, p != nil && p.pooled, err)
		}
		t.Logf("per-call path with an empty pool: %v", time.Since(t0))
		// The miss asked for more; the next call finds one.
		waitPoolReady(t, s, 1)
		_, _, p, err = runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/true",
			UID: nobody, GID: nobody, Dir: "/", Session: "fb", Call: "refilled"})
		if err != nil || !p.pooled {
			t.Fatalf("after the refill: pooled=%v err=%v", p != nil && p.pooled, err)
		}
	})
}

// TestPoolRefillsOffTheCallsPath: a take that leaves a spare ready starts no refill while its
// call runs (the call's cleanup refills); a take that empties the pool refills at once, its
// call still running.
func TestPoolRefillsOffTheCallsPath(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	waitPoolReady(t, s, poolMin)
	var running []*Process
	defer func() {
		for _, p := range running {
			_ = p.Kill("test over")
			_, _ = p.Wait()
		}
	}()
	start := func(call string) {
		t.Helper()
		p, err := s.Start(ctxTimeout(t, time.Minute), &Spec{Path: "/bin/sleep", Args: []string{"60"},
			UID: nobody, GID: nobody, Dir: "/", Session: "rf", Call: call})
		if err != nil {
			t.Fatal(err)
		}
		running = append(running, p)
		if !p.pooled {
			t.Fatalf("call %s did not come from the pool", call)
		}
	}
	for i := 0; i < poolMin-1; i++ {
		start("spare-left-" + strconv.Itoa(i))
	}
	time.Sleep(50 * refillDelay)
	if n := len(readyInits(s)); n != 1 {
		t.Fatalf("%d inits ready %v after the takes, want the 1 spare: a refill ran beside the calls", n, 50*refillDelay)
	}
	start("emptied")
	waitPoolReady(t, s, 1) // fails after 10 s
	for _, p := range running {
		if !alive(p.cmd.Process.Pid) {
			t.Fatalf("call's init %d ended before the refill", p.cmd.Process.Pid)
		}
	}
	for _, p := range running {
		if err := p.Kill("test"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	running = nil
	waitPoolReady(t, s, poolMin)
}

// TestPoolKillSession: KillSession kills a call that came from the pool and removes its cgroup,
// which lies outside the session's subtree.
func TestPoolKillSession(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	waitPoolReady(t, s, 1)
	spec := sleepSpec("pooled")
	spec.Session = "ks"
	p, err := s.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !p.pooled {
		t.Fatal("not pooled")
	}
	if err := s.KillSession("ks", "session_deleted"); err != nil {
		t.Fatal(err)
	}
	for c, d := range p.cg.dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s cgroup %s left after KillSession", c, d)
		}
	}
	res, err := p.Wait()
	if err != nil || res.KilledBy != "session_deleted" || res.Signal != "killed" {
		t.Fatalf("res=%+v err=%v", res, err)
	}
}

// TestPoolReapedAtClose: Close kills the idle pooled inits and removes their cgroups.
func TestPoolReapedAtClose(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	waitPoolReady(t, s, poolMin)
	idle := readyInits(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, in := range idle {
		if alive(in.cmd.Process.Pid) {
			t.Errorf("idle pooled init %d survived Close", in.cmd.Process.Pid)
		}
		for c, d := range in.cg.dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s cgroup %s left after Close", c, d)
			}
		}
	}
	if left := subtreeLeft(s); len(left) > 0 {
		t.Errorf("cgroups left after Close: %v", left)
	}
}

// TestPoolDrainsWhenIdle: after the pool's idle time without a Start the idle inits are killed; the next
// Start takes the per-call path and the pool fills again.
func TestPoolDrainsWhenIdle(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{}, func(sm *seams) { sm.poolIdle = 300 * time.Millisecond })
	waitPoolReady(t, s, 1)
	idle := readyInits(s)
	deadline := time.Now().Add(5 * time.Second)
	for len(readyInits(s)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(readyInits(s)); n > 0 {
		t.Fatalf("%d inits still ready after %v idle", n, 5*time.Second)
	}
	// Taken off the ready list first, then killed and reaped.
	for _, in := range idle {
		for alive(in.cmd.Process.Pid) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if alive(in.cmd.Process.Pid) {
			t.Errorf("drained init %d still runs", in.cmd.Process.Pid)
		}
	}
	_, _, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/true",
		UID: nobody, GID: nobody, Dir: "/", Session: "idle", Call: "c"})
	if err != nil || p.pooled {
		t.Fatalf("pooled=%v err=%v", p != nil && p.pooled, err)
	}
	waitPoolReady(t, s, 1)
}

// TestPoolReservedSession: no session may be named like the pool's cgroup.
func TestPoolReservedSession(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	if _, err := s.Start(context.Background(), &Spec{Path: "/bin/true", Session: poolDir, Call: "c"}); err == nil {
		t.Fatal("Start in session \"pool\" succeeded")
	}
}

// TestPoolStdioAndExtraFiles: a pooled init gets the call's stdin, stdout, stderr and
// ExtraFiles (as 3, 4, ...) and nothing else of the daemon's; a nil stdin reads /dev/null.
func TestPoolStdioAndExtraFiles(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	for _, withStdin := range []bool{true, false} {
		waitPoolReady(t, s, 1)
		spec := &Spec{Path: "/bin/sh", Args: []string{"-c", "cat; echo to-fd3 >&3; echo to-fd4 >&4; ls /proc/self/fd | wc -l"},
			UID: nobody, GID: nobody, Dir: "/", Session: "stdio", Call: fmt.Sprintf("c%v", withStdin)}
		if withStdin {
			inR, inW, _ := os.Pipe()
			inW.Write([]byte("from-stdin\n"))
			inW.Close()
			defer inR.Close()
			spec.Stdin = inR
		}
		var readers []*os.File
		for i := 0; i < 2; i++ {
			r, w, _ := os.Pipe()
			defer r.Close()
			defer w.Close()
			readers = append(readers, r)
			spec.ExtraFiles = append(spec.ExtraFiles, w)
		}
		res, out, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), spec)
		if err != nil || res.ExitCode != 0 || !p.pooled {
			t.Fatalf("res=%+v pooled=%v err=%v out=%q", res, p != nil && p.pooled, err, out)
		}
		for _, f := range spec.ExtraFiles {
			f.Close()
		}
		// 0, 1, 2, the two ExtraFiles and the fd ls reads /proc/self/fd through.
		want := "6\n"
		if withStdin {
			want = "from-stdin\n" + want
		}
		if out != want {
			t.Errorf("stdin %v: out %q, want %q", withStdin, out, want)
		}
		for i, r := range readers {
			b := make([]byte, 64)
			n, _ := r.Read(b)
			if got, want := string(b[:n]), fmt.Sprintf("to-fd%d\n", i+3); got != want {
				t.Errorf("fd %d got %q, want %q", i+3, got, want)
			}
		}
	}
}

// TestPoolSpecInlineOrMemfd: a pooled init takes a spec in the hand-over message when it fits,
// in a memfd when it does not, or when the socket's buffer is too small for it in one message;
// either way the program sees the whole environment, and the spec's slot is not left open.
func TestPoolSpecInlineOrMemfd(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	const smallBuf = -1 // a 20 KB spec, with every ready init's socket buffer cut to 4 KB
	for _, size := range []int{10, inlineSpecMax - 1024, inlineSpecMax, 2 * inlineSpecMax, smallBuf} {
		waitPoolReady(t, s, 1)
		if size == smallBuf {
			size = 20 << 10
			for _, in := range readyInits(s) {
				if err := unix.SetsockoptInt(int(in.sock.Fd()), unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
					t.Fatal(err)
				}
			}
		}
		big := strings.Repeat("x", size)
		spec := &Spec{Path: "/bin/sh", Args: []string{"-c", `echo ${#BIG}; ls /proc/self/fd | wc -l`},
			Env: []string{"BIG=" + big}, UID: nobody, GID: nobody, Dir: "/", Session: "specsize", Call: fmt.Sprintf("c%d", size)}
		res, out, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), spec)
		if err != nil || res.ExitCode != 0 || !p.pooled {
			t.Fatalf("size %d: res=%+v pooled=%v err=%v out=%q", size, res, p != nil && p.pooled, err, out)
		}
		// 0, 1, 2 and the fd ls reads /proc/self/fd through.
		if want := fmt.Sprintf("%d\n4\n", size); out != want {
			t.Errorf("size %d: out %q, want %q", size, out, want)
		}
	}
}

// TestPoolPreludeFailureIsReported: a pooled init whose prelude fails is never counted ready,
// and its own report (step and errno) is the error, so a host where the prelude cannot work
// says why in the log instead of silently running every call down the per-call path.
func TestPoolPreludeFailureIsReported(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	good := s.prelude
	defer func() { s.prelude = good }()
	s.llHint.Store(nil) // the failing prelude below is the one started
	s.netnsHint.Store(nil)
	// A prelude that mounts onto a path that cannot exist, not marked optional.
	e := &specEncoder{}
	e.u32(specMagic)
	e.u32(specVersion)
	if err := e.mounts([]mountOp{mountFS("tmpfs", "/nonexistent/sandboxd-prelude-test", "tmpfs", 0, "")}); err != nil {
		t.Fatal(err)
	}
	s.prelude = e.b
	in, err := s.startPoolInit(s.userHint.Load())
	if err == nil {
		s.discard(in)
		t.Fatal("a pooled init with a failing prelude was reported ready")
	}
	var ie *InitError
	if !errors.As(err, &ie) || ie.Errno != syscall.ENOENT || !strings.Contains(ie.Step, "mount") {
		t.Fatalf("error = %v, want the init's report of the failed mount (ENOENT)", err)
	}
}

// TestPooledInitNetns: a pooled init waits in the network namespace of the latest call's
// session; whichever call it gets ends up in its own: that session's, another session's, or
// the host's.
func TestPooledInitNetns(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	nsOf := func(f *os.File) string { return fmt.Sprintf("net:[%d]", fileIno(t, f)) }
	host, err := hostNetns()
	if err != nil {
		t.Fatal(err)
	}
	call := func(session, name string, hostNet bool) string {
		t.Helper()
		waitPoolReady(t, s, poolMin)
		res, out, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{
			Path: "/bin/readlink", Args: []string{"/proc/self/ns/net"}, Dir: "/", AllowNetwork: hostNet,
			UID: nobody, GID: nobody, Session: session, Call: name,
		})
		if err != nil || res.ExitCode != 0 || !p.pooled {
			t.Fatalf("%s: %v %+v pooled=%v %s", name, err, res, p != nil && p.pooled, out)
		}
		return strings.TrimSpace(out)
	}
	call("netA", "a1", false)
	// The inits started before a hint existed wait in the host's namespace: drain them.
	for i := 0; i < poolMax; i++ {
		if in := s.pool.take(nobodyUID); in != nil {
			s.discard(in)
		}
	}
	s.mu.Lock()
	a := nsOf(s.netns["netA"])
	s.mu.Unlock()
	if got := call("netA", "a2", false); got != a {
		t.Fatalf("session A's call in %s, want its namespace %s", got, a)
	}
	got := call("netB", "b1", false)
	s.mu.Lock()
	b := nsOf(s.netns["netB"])
	s.mu.Unlock()
	if got != b || b == a {
		t.Fatalf("session B's call in %s, want its namespace %s (A's is %s)", got, b, a)
	}
	if got := call("netB", "h1", true); got != host {
		t.Fatalf("a call with the host's network in %s, want the host's %s", got, host)
	}
}

// TestHoldMountNS: the held fd is the process's own mount namespace (not the daemon's), and it
// is close-on-exec, whether it came through a pidfd or /proc.
func TestHoldMountNS(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	cmd := exec.Command("/bin/sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	fd := holdMountNS(cmd.Process.Pid)
	if fd < 0 {
		t.Fatal("could not hold the mount namespace")
	}
	defer releaseMountNS(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	held := st.Ino
	var want, own syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/mnt", &want); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat("/proc/self/ns/mnt", &own); err != nil {
		t.Fatal(err)
	}
	if held != want.Ino || held == own.Ino {
		t.Errorf("held mount ns inode %d, the child's is %d, ours %d", held, want.Ino, own.Ino)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("held mount ns fd flags %#x, %v: want close-on-exec", flags, err)
	}
}

// TestPooledInitReportsEnd: a pooled init reports the call's end and status before its own
// exit, and only once nothing else of the call is left: the orphan `setsid -f` leaves behind
// is dead, and the cgroup holds nothing but the exiting init, when Wait returns. Bash too
// runs as the init's child: it can kill itself, as on a host.
func TestPooledInitReportsEnd(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	dir := directFixture(t)
	ctx := ctxTimeout(t, 30*time.Second)
	for _, tc := range []struct {
		name     string
		direct   []string
		script   string
		code     int
		reported bool
	}{
		{"orphan", []string{"setsid", "-f", "sleep", "999.301"}, "", 0, true},
		{"exit", []string{"sh", "-c", "exit 7"}, "", 7, true},
		{"signal", []string{"sh", "-c", "kill -KILL $$"}, "", 128 + 9, true},
		{"bash", nil, "setsid -f sleep 999.302; exit 3", 3, true},
		{"bash_kills_itself", nil, "kill -TERM $$; sleep 5", 128 + 15, true},
	} {
		waitPoolReady(t, s, 1)
		spec := &Spec{Path: "/bin/bash", Args: []string{"-c", tc.script}, Direct: tc.direct,
			Env: []string{"PATH=/usr/bin:/bin"}, Dir: dir, UID: nobody, GID: nobody, Session: "end", Call: tc.name}
		res, _, p, err := runProc(t, s, ctx, spec)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !p.pooled || p.endReported != tc.reported {
			t.Fatalf("%s: pooled %v, end reported %v; want pooled, reported %v", tc.name, p.pooled, p.endReported, tc.reported)
		}
		if res.ExitCode != tc.code || res.Signal != "" {
			t.Errorf("%s: exit %d signal %q, want %d", tc.name, res.ExitCode, res.Signal, tc.code)
		}
		noHostProcess("999.30")(t, nil, res, "")
		d := p.cg.dirs["freezer"]
		if p.cg.v2 {
			d = p.cg.dirs[""]
		}
		for _, pid := range cgroupfs.ProcsUnder(d) {
			if pid != p.cmd.Process.Pid {
				t.Errorf("%s: pid %d still in the call's cgroup when Wait returned", tc.name, pid)
			}
		}
	}
}

// TestPooledInitUnderLowFdLimit: where the fd limit is below the report socket's slot
// (SBX_FD_STATUS_MIN), a pooled init still runs its call, which then ends by the init's exit.
func TestPooledInitUnderLowFdLimit(t *testing.T) {
	// Not parallel: the fd limit is the process's.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	low.Cur = 150 // the inits inherit it: syscall.Setrlimit makes forks keep it
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	s := newTestSandbox(t, Config{})
	waitPoolReady(t, s, 1)
	res, _, p, err := runProc(t, s, ctxTimeout(t, 10*time.Second), &Spec{Path: "/bin/sh", Args: []string{"-c", "exit 5"},
		Dir: "/", Env: []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody, Session: "lowfd", Call: "c"})
	if err != nil || !p.pooled || p.endReported || res.ExitCode != 5 {
		t.Fatalf("err %v, pooled %v, end reported %v, exit %+v; want a pooled call ending by the init's exit with 5",
			err, p != nil && p.pooled, p != nil && p.endReported, res)
	}
}

// TestPoolSharedAmongUsers: two users calling at once each get inits made for them; one's
// miss does not drop the other's ready init (it is still calling), and the filler makes the
// next for the user with the fewest ready. Made for the latest caller only, the pool flipped
// between them and the quieter user's calls took the per-call path.
func TestPoolSharedAmongUsers(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	const a, b = nobody - 2, nobody - 3
	has := func(uid uint32) bool {
		return slices.ContainsFunc(readyInits(s), func(in *poolInit) bool { return in.uid == uid })
	}
	waitPoolReady(t, s, poolMin)
	for _, uid := range []uint32{a, b} {
		if in := s.pool.take(uid); in != nil {
			s.discard(in)
			t.Fatalf("uid %d took an init made for another user", uid)
		}
		waitFor(t, func() bool { return has(uid) })
	}
	if !has(a) {
		t.Errorf("b's miss dropped a's ready init while a is still calling: ready %v", readyUIDs(s))
	}
}

func readyUIDs(s *Sandbox) []uint32 {
	var uids []uint32
	for _, in := range readyInits(s) {
		uids = append(uids, in.uid)
	}
	return uids
}

// hostNetns names the test process's own network namespace. Not by /proc/self, which is the
// main thread's: a parallel test's ListenInSession may have that thread in a session's
// namespace at the moment. A thread this goroutine holds is in no one else's.
func hostNetns() (string, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return os.Readlink("/proc/thread-self/ns/net")
}
