package audit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestDiskFullFailsClosedAndRecovers fills a small tmpfs under the log: Append must refuse with
// AuditUnavailable (leaving no half line), Healthy must drop, and both must recover on their own
// once space is freed, with the chain still verifying.
func TestDiskFullFailsClosedAndRecovers(t *testing.T) {
	mnt := smallTmpfs(t, "256k")
	dir := filepath.Join(mnt, "audit")
	l := openTest(t, Config{Dir: dir, CheckpointEvery: 1 << 20})
	appendN(t, l, 5)

	filler := filepath.Join(mnt, "filler")
	f, _ := fillUp(t, filler)
	f.Close()

	// A large input spills past the slack of the log's last page: a short write that must be
	// cut back, not chained over.
	big := callRecord(1)
	big.Input = []byte(`{"content":"` + strings.Repeat("x", 32<<10) + `"}`)
	for range 3 {
		err := l.Append(context.Background(), big)
		if errcode.Of(err) != errcode.AuditUnavailable || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on full disk: %v (code %s)", err, errcode.Of(err))
		}
		if Classify(err) != errcode.AuditUnavailable {
			t.Fatalf("classify: %s", Classify(err))
		}
	}
	if l.Healthy() {
		t.Fatal("healthy on a full disk")
	}
	if _, err := VerifyDir(dir, nil); err != nil {
		t.Fatalf("failed writes left a bad tail: %v", err)
	}

	os.Remove(filler)
	deadline := time.Now().Add(5 * time.Second)
	for !l.Healthy() { // the periodic probe notices without any Append
		if time.Now().After(deadline) {
			t.Fatal("did not recover health after space was freed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.Append(context.Background(), big); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyDir(dir, l.PublicKey())
	if err != nil || rep.Records != 5+1+3+1 {
		t.Fatalf("verify after recovery: %v %+v", err, rep)
	}
}

// TestProbeNeedsRoom: with a few KB free (what a failed write's repair gives back) the probe
// keeps the log unhealthy; only room for a burst of records (probeBytes) brings it back.
func TestProbeNeedsRoom(t *testing.T) {
	mnt := smallTmpfs(t, "512k")
	l := openTest(t, Config{Dir: filepath.Join(mnt, "audit"), CheckpointEvery: 1 << 20})
	appendN(t, l, 2)
	// Closed first: probe is the writer goroutine's, and only the directory matters to it.
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, size := fillUp(t, filepath.Join(mnt, "filler"))
	defer f.Close()
	for _, c := range []struct {
		free    int64
		healthy bool
	}{{8 << 10, false}, {probeBytes / 2, false}, {probeBytes + 16<<10, true}} {
		if err := f.Truncate(size - c.free); err != nil {
			t.Fatal(err)
		}
		if err := l.probe(); (err == nil) != c.healthy {
			t.Errorf("probe with %d KB free: %v, want healthy %v", c.free>>10, err, c.healthy)
		}
	}
}

// smallTmpfs mounts a tmpfs of size (root only) for a disk-full test and returns its path.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	testutil.RequireRoot(t)
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount tmpfs (needs CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}

// fillUp writes path until its filesystem is full and returns it still open, with its size.
func fillUp(t *testing.T, path string) (*os.File, int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1024)
	var size int64
	for {
		n, err := f.Write(chunk)
		size += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return f, size
		}
	}
}
