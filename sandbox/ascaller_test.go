package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestAsCaller: inside, paths are checked with the caller's uid, gid and groups (root's file
// capabilities gone); after, even when f panics, the thread is the daemon's again.
func TestAsCaller(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	dir := hostTempDir(t, "/var/tmp", "sbx-ascaller-")
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(dir, "private") // root's, 0700
	groupOnly := filepath.Join(dir, "group") // root:4242, 0070
	for _, d := range []string{private, groupOnly} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(groupOnly, 0, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupOnly, 0o070); err != nil {
		t.Fatal(err)
	}
	// The test keeps the thread (LockOSThread nests), so "after" looks at the same thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := saveIdentity()
	if err != nil {
		t.Fatal(err)
	}
	readable := func(uid, gid uint32, groups []uint32, d string) bool {
		t.Helper()
		var rerr error
		if err := asCaller(uid, gid, groups, func() { _, rerr = os.ReadDir(d) }); err != nil {
			t.Fatal(err)
		}
		if rerr != nil && !errors.Is(rerr, syscall.EACCES) {
			t.Fatalf("read %s: %v", d, rerr)
		}
		return rerr == nil
	}
	if readable(nobody, nobody, nil, private) {
		t.Error("nobody listed a root-only dir")
	}
	if !readable(0, 0, nil, private) {
		t.Error("root could not list its own dir")
	}
	if readable(nobody, nobody, nil, groupOnly) {
		t.Error("nobody listed a dir of a group it is not in")
	}
	if !readable(nobody, nobody, []uint32{4242}, groupOnly) {
		t.Error("a member of the dir's group could not list it")
	}
	func() {
		defer func() { _ = recover() }()
		_ = asCaller(nobody, nobody, nil, func() { panic("in f") })
	}()
	after, err := saveIdentity()
	if err != nil {
		t.Fatal(err)
	}
	if after.uid != before.uid || after.gid != before.gid || !slices.Equal(after.groups, before.groups) {
		t.Fatalf("identity after asCaller = %+v, want %+v", after, before)
	}
	if _, err := os.ReadDir(private); err != nil {
		t.Fatalf("the daemon's thread lost root's rights: %v", err)
	}
}

// TestAsCallerConcurrent: goroutines switching to callers' identities on their threads never
// lend one to another goroutine: callers running side by side are refused a root-only dir every
// time, and root reading it meanwhile on the daemon's other threads is never refused.
func TestAsCallerConcurrent(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	dir := hostTempDir(t, "/var/tmp", "sbx-ascaller-conc-") // root's, 0700
	var callers, readers sync.WaitGroup
	var bad atomic.Value
	var rootReads atomic.Int64
	for g := 0; g < 8; g++ {
		callers.Add(1)
		go func(uid uint32) {
			defer callers.Done()
			for i := 0; i < 2000; i++ {
				var rerr error
				if err := asCaller(uid, uid, []uint32{uid + 1000}, func() { _, rerr = os.ReadDir(dir) }); err != nil {
					bad.Store(err.Error())
					return
				}
				if rerr == nil {
					bad.Store("a caller listed a root-only dir")
					return
				}
			}
		}(uint32(60000 + g))
	}
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := os.ReadDir(dir); err != nil {
					bad.Store("root was refused on a daemon thread: " + err.Error())
					return
				}
				rootReads.Add(1)
			}
		}()
	}
	callers.Wait()
	close(stop)
	readers.Wait()
	if b := bad.Load(); b != nil {
		t.Fatal(b)
	}
	if rootReads.Load() == 0 {
		t.Fatal("root never read while the callers ran: the test checked nothing")
	}
}
