package daemon

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// The cgroup-name lock refuses a second holder, and a clean release leaves no file behind
// while the name stays lockable.
func TestCgroupLockRefusesSecondAndCleansUp(t *testing.T) {
	testutil.RequireRoot(t)
	name := "locktest-" + strconv.Itoa(os.Getpid())
	first, err := lockCgroupName(name)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := lockCgroupName(name); err == nil {
		second.Release()
		first.Release()
		t.Fatal("a second daemon got the same cgroup name")
	} else if !strings.Contains(err.Error(), "another sandboxd") {
		t.Fatalf("second lock: %v", err)
	}
	first.Release()
	if _, err := os.Stat(first.path); !os.IsNotExist(err) {
		t.Fatalf("lock file still there after release: %v", err)
	}
	again, err := lockCgroupName(name)
	if err != nil {
		t.Fatalf("relock after release: %v", err)
	}
	again.Release()
}

// A lock file left by a daemon that was killed is swept at the next start; a held one stays.
func TestStaleCgroupLocksAreSwept(t *testing.T) {
	testutil.RequireRoot(t)
	held, err := lockCgroupName("locktest-held-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	stale := filepath.Join(filepath.Dir(held.path), "cgroup-locktest-stale-"+strconv.Itoa(os.Getpid())+"-0000000000000000.lock")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := lockCgroupName("locktest-other-" + strconv.Itoa(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale lock file still there after a daemon started: %v", err)
	}
	if _, err := os.Stat(held.path); err != nil {
		t.Errorf("a held lock file was swept: %v", err)
	}
}
