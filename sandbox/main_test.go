package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
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
	p, err := s.Start(context.Background(), &Spec{Path: "/bin/sleep", Args: []string{"999.201"},
		UID: 65534, GID: 65534, Dir: "/", Session: "crash", Call: "c"})
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	fmt.Printf("started %d\n", p.Pid())
	select {} // until killed
}

var cgroupNameRE = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// newTestSandbox gives each test its own cgroup subtree: New reaps leftovers under its root,
// which must not hit a parallel test's calls.
func newTestSandbox(t testing.TB, cfg Config) *Sandbox {
	t.Helper()
	testutil.RequireRoot(t)
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "sandboxd-test-" + cgroupNameRE.ReplaceAllString(t.Name(), "_")
	}
	s, err := New(cfg, zaptest.NewLogger(t))
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
