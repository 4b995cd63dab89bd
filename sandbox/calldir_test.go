package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestCallDirReplacedByLink: a call whose dir lies in a writable dir never runs outside it. A
// dir on the way replaced by a link out before the call is refused by the plan; one swapped
// for the link between the plan and the child's chdir is refused by the child. Each call
// either runs in the dir or fails with ErrDirMoved, having run nothing.
func TestCallDirReplacedByLink(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	root := hostTempDir(t, "/var/tmp", "calldir-")
	outside := hostTempDir(t, "/var/tmp", "calldir-out-")
	sub, swap := filepath.Join(root, "sub"), filepath.Join(root, "swap")
	for _, d := range []string{root, outside} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, swap); err != nil {
		t.Fatal(err)
	}
	spec := func(call string) *Spec {
		return &Spec{Path: "/bin/sh", Args: []string{"-c", "pwd -P"}, Env: []string{"PATH=/usr/bin:/bin"},
			Dir: sub, WritableDirs: []string{root}, UID: nobody, GID: nobody, Session: "s", Call: call}
	}
	exchange := func() {
		if err := unix.Renameat2(unix.AT_FDCWD, sub, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
			t.Error(err)
		}
	}

	exchange() // sub is the link now
	if _, out, err := run(t, s, ctxTimeout(t, 10*time.Second), spec("linked")); !errors.Is(err, ErrDirMoved) {
		t.Fatalf("a call in a dir replaced by a link out: err %v, out %q; want ErrDirMoved", err, out)
	}
	exchange() // the dir again

	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			exchange()
		}
	}()
	ran, refused := 0, 0
	for i := 0; i < 150; i++ {
		_, out, err := run(t, s, ctxTimeout(t, 10*time.Second), spec("race"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		switch {
		case errors.Is(err, ErrDirMoved):
			refused++
		case err != nil:
			t.Fatalf("call %d: %v", i, err)
		case strings.TrimSpace(out) != sub && strings.TrimSpace(out) != swap:
			t.Fatalf("call %d ran in %q, outside %s", i, strings.TrimSpace(out), root)
		default:
			ran++
		}
	}
	stop.Store(true)
	<-done
	t.Logf("%d calls ran in the dir, %d were refused", ran, refused)
}
