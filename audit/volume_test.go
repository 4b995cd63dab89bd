package audit

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// smallVolume mounts a fresh 24 MiB ext4 keeping reserved percent of it for root, writable by
// anyone, and returns where; it skips the test where loop devices or mkfs.ext4 are missing.
func smallVolume(t *testing.T, reserved string) string {
	t.Helper()
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("needs mkfs.ext4 (e2fsprogs) for a volume of its own")
	}
	img := filepath.Join(t.TempDir(), "vol.img")
	// Where nobody can reach it (t.TempDir's parents are root's alone).
	host, err := os.MkdirTemp("/var/tmp", "sbx-audit-vol-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(host) })
	if err := os.Chmod(host, 0o755); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(host, "mnt")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 24<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-m", reserved, img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("no loop device to mount a volume of its own (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	if err := os.Chmod(mnt, 0o1777); err != nil {
		t.Fatal(err)
	}
	return mnt
}

// fillAsNobody writes zeros into dir as nobody until the volume refuses more.
func fillAsNobody(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, "fill"), "bs=64k")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "No space left") {
		t.Fatalf("dd as nobody: %v %s, want the volume full", err, out)
	}
}

// TestUsersFilesCannotReachTheFloor: the log is written by root, and the free-space floor
// counts what root may write. Where the volume keeps a reserve for root (ext4's), one user's
// files, however large (a call's `fallocate` in a home on the log's volume), cannot bring it
// under the floor and refuse every user's calls; where it keeps none, they can, and the daemon
// says so when it opens the log.
func TestUsersFilesCannotReachTheFloor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reserved string
		low      bool
	}{{"50", false}, {"0", true}} {
		t.Run("reserve "+tc.reserved+"%", func(t *testing.T) {
			vol := smallVolume(t, tc.reserved)
			core, logs := observer.New(zapcore.WarnLevel)
			l, err := Open(Config{Dir: filepath.Join(vol, "audit"), MinFreeBytes: 2 << 20}, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if warned := logs.FilterMessageSnippet("only root may write").Len() > 0; warned != tc.low {
				t.Errorf("warned at open %v, want %v", warned, tc.low)
			}
			if logs.FilterMessageSnippet("one users write to").Len() > 0 {
				t.Error("a volume of the log's own taken for one users write to")
			}
			fillAsNobody(t, vol)
			l.refreshSpace()
			if l.spaceLow.Load() != tc.low {
				t.Fatalf("after a user filled what users may write: floor engaged %v, want %v", l.spaceLow.Load(), tc.low)
			}
			err = l.Append(context.Background(), &Record{Kind: KindCallDecide})
			if (err != nil) != tc.low {
				t.Errorf("a new call's record: %v, want refused %v", err, tc.low)
			}
		})
	}
}

// TestWarnsWhenUsersShareTheVolume: a log on the file system of /tmp (or /home, /var/tmp) is
// on one users write to, whose inodes they can take: the daemon says so when it opens it.
func TestWarnsWhenUsersShareTheVolume(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("/tmp", "sbx-audit-shared-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	core, logs := observer.New(zapcore.WarnLevel)
	l, err := Open(Config{Dir: filepath.Join(dir, "audit")}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if logs.FilterMessageSnippet("one users write to").Len() == 0 {
		t.Errorf("a log under /tmp: no warning that users share its volume")
	}
}
