package daemon

import (
	"os"
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
