package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNamesBelowBounded: the walk the daemon makes of a tree a command copies stops, saying so,
// when the budget its decision shares runs out, when the request ends, or when it holds too
// many queued names; it follows no link; and it stops once it has found enough.
func TestNamesBelowBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	for _, d := range []string{filepath.Join(dir, "a/b/c"), filepath.Join(dir, "a/.git/hooks"), filepath.Join(outside, ".git/hooks")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "a/link")); err != nil {
		t.Fatal(err)
	}
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	hooks := func(rel string) bool { return strings.HasSuffix(rel, ".git/hooks") }
	walk := func(ctx context.Context, b WalkBudget, maxKept int) ([]string, bool, WalkBudget) {
		t.Helper()
		kept, complete, err := NamesBelow(ctx, uid, gid, nil, dir, hooks, &b, maxKept)
		if err != nil {
			t.Fatal(err)
		}
		return kept, complete, b
	}
	kept, complete, left := walk(context.Background(), WalkBudget{Entries: 1000, Bytes: 1 << 20}, 8)
	if !complete || len(kept) != 1 || kept[0] != "a/.git/hooks" {
		t.Errorf("whole walk: %v complete %v; want a/.git/hooks alone (the link not followed)", kept, complete)
	}
	if used := 1000 - left.Entries; used != 300+6 {
		t.Errorf("the walk counted %d entries, want %d (300 files, a, b, c, .git, hooks, link)", used, 306)
	}
	if _, complete, _ := walk(context.Background(), WalkBudget{Entries: 100, Bytes: 1 << 20}, 8); complete {
		t.Error("a walk past its entries is complete")
	}
	if _, complete, _ := walk(context.Background(), WalkBudget{Entries: 1000, Bytes: 2}, 8); complete {
		t.Error("a walk past its bytes is complete")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, complete, _ := walk(ctx, WalkBudget{Entries: 1000, Bytes: 1 << 20}, 8); complete {
		t.Error("a walk whose request ended is complete")
	}
	if kept, complete, _ := walk(context.Background(), WalkBudget{Entries: 1000, Bytes: 1 << 20}, 1); !complete || len(kept) != 1 {
		t.Errorf("a walk that found enough: %v complete %v", kept, complete)
	}
}

// TestOpenWalkDirRefusesWhatSwappedIn: a dir the walk listed may be replaced before it is
// opened: a FIFO there fails at once instead of blocking the walk, and a link (to a dir outside
// or inside) is not followed.
func TestOpenWalkDirRefusesWhatSwappedIn(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, to := range map[string]string{"out": outside, "in": "d"} {
		if err := os.Symlink(to, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(root)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, rel := range []string{"fifo", "out", "in", "in/x", "../" + filepath.Base(outside)} {
			if f, err := openWalkDir(root, rel); err == nil {
				f.Close()
				t.Errorf("%s opened", rel)
			}
		}
		for _, rel := range []string{"", "d"} {
			f, err := openWalkDir(root, rel)
			if err != nil {
				t.Errorf("%q: %v", rel, err)
				continue
			}
			f.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an open blocked")
	}
}
