package sandbox

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// workerEnv makes the test binary act as the per-session Go worker when it is started as
// Spec{Path: "/proc/self/exe"}. The hidden init argument itself never reaches TestMain: the C
// constructor handles it and execs before the Go runtime starts.
const workerEnv = "SANDBOXD_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		os.Exit(testWorker())
	}
	if root := os.Getenv(daemonEnv); root != "" {
		os.Exit(testDaemon(root))
	}
	// The daemon's environment must not reach a child (escape case daemon_env). Set once for
	// the whole run: a test that set and unset it would change it under the parallel ones.
	os.Setenv(daemonSecretEnv, secret)
	goleak.VerifyTestMain(m)
}

// testWorker exercises what the real worker needs under the seccomp table: goroutines and
// threads, file I/O, os/exec (clone, pidfd, wait), timers.
func testWorker() int {
	done := make(chan int, 4)
	for i := 0; i < 4; i++ {
		go func(i int) {
			time.Sleep(time.Millisecond)
			done <- i
		}(i)
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	if _, err := os.ReadFile("/etc/hostname"); err != nil {
		fmt.Println("worker read:", err)
		return 1
	}
	if err := os.WriteFile("/tmp/worker", []byte("x"), 0o600); err != nil {
		fmt.Println("worker write:", err)
		return 1
	}
	out, err := exec.Command("/bin/echo", "child").Output()
	if err != nil {
		fmt.Println("worker exec:", err)
		return 1
	}
	fmt.Printf("worker ok args=%v child=%s", os.Args[1:], out)
	return 0
}

// daemonEnv makes the test binary a stand-in daemon that starts one long call and blocks,
// so a test can SIGKILL it and check nothing of the call survives.
const daemonEnv = "SANDBOXD_TEST_DAEMON_ROOT"

func testDaemon(root string) int {
	s, err := New(Config{CgroupRoot: root}, zap.NewNop())
	if err != nil {
		fmt.Println("new:", err)
		return 1
	}
	// One call through the pool (filled by New), one started for itself, and the pool's
	// idle inits: none may outlive the daemon.
	spec := func(call string) *Spec {
		return &Spec{Path: "/bin/sleep", Args: []string{"999.201"},
			UID: 65534, GID: 65534, Dir: "/", Session: "crash", Call: call}
	}
	p, err := s.Start(context.Background(), spec("c"))
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	s.noPool.Store(true)
	cold, err := s.Start(context.Background(), spec("cold"))
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	if !p.pooled || cold.pooled {
		fmt.Println("start: want one pooled and one cold call")
		return 1
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.pool.mu.Lock()
		n := len(s.pool.ready)
		s.pool.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("start: the pool never refilled")
			return 1
		}
	}
	s.pool.mu.Lock()
	line := fmt.Sprintf("started %d %d", p.Pid(), cold.Pid())
	for _, in := range s.pool.ready {
		line += fmt.Sprintf(" %d", in.cmd.Process.Pid)
	}
	s.pool.mu.Unlock()
	fmt.Println(line)
	select {} // until killed
}

var cgroupNameRE = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// daemonSecretEnv holds secret in the test binary's environment.
const daemonSecretEnv = "SANDBOXD_DAEMON_SECRET"

// newTestSandbox gives each test its own cgroup subtree: New reaps leftovers under its root,
// which must not hit a parallel test's calls. Each seam func changes what the test replaces.
func newTestSandbox(t testing.TB, cfg Config, seam ...func(*seams)) *Sandbox {
	t.Helper()
	testutil.RequireRoot(t)
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "sandboxd-test-" + cgroupNameRE.ReplaceAllString(t.Name(), "_")
	}
	sm := realSeams()
	for _, f := range seam {
		f(&sm)
	}
	s, err := newSandbox(cfg, zaptest.NewLogger(t), sm)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		if err := s.cg.removeTree(""); err != nil {
			t.Errorf("remove test cgroups: %v", err)
		}
		for _, d := range s.cg.dirs {
			_ = os.Remove(d)
		}
	})
	return s
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// hostTempDir makes a directory under parent, removed when the test ends. Not t.TempDir():
// a call's /tmp is private, so most fixtures must live where children see the host
// (/var/tmp); the few that test a dir under the host's /tmp ask for it.
func hostTempDir(t testing.TB, parent, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// planOf is the child spec s plans for spec (the session's network namespace it held, closed).
func planOf(t testing.TB, s *Sandbox, spec Spec) *childSpec {
	t.Helper()
	p := &Process{s: s, spec: spec}
	p.lim = p.spec.Limits.merge(s.limits)
	cs, netns, err := s.plan(p)
	if err != nil {
		t.Fatal(err)
	}
	s.guarding.done(p) // no call runs: Wait's part
	p.unpinCovers()
	if netns != nil {
		netns.Close()
	}
	return cs
}

// fileIno is the inode number behind f (a namespace's, for a namespace file).
func fileIno(t testing.TB, f *os.File) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// serveUnix listens on a unix socket at path (mode 0777, as agents' sockets are) and answers
// every connection with greeting, until the test ends.
func serveUnix(t testing.TB, path, greeting string) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
}
