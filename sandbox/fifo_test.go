package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFIFOsDoNotBlockThePlan: where the plan reads a config git's config names, or lists the
// ancestors of a deny path, a FIFO the user put there is not waited on: open(2) of a FIFO
// blocks until a writer comes, and each call would leave a daemon thread waiting. A git config
// that is a FIFO refuses the call (what git would read there is unknown); one a config
// includes is named all the same.
func TestFIFOsDoNotBlockThePlan(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	home := filepath.Join(d, "home")
	proj := filepath.Join(home, "proj")
	if err := os.MkdirAll(filepath.Join(proj, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proj, ".git", "config"), []byte("[include]\n\tpath = ../inc.gitconfig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifos := []string{filepath.Join(home, ".gitconfig"), filepath.Join(proj, "inc.gitconfig"), filepath.Join(proj, "deep")}
	for _, f := range fifos {
		if err := unix.Mkfifo(f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan []string)
	go func() {
		if _, err := gitNamedPaths(ProtectedCandidates([]string{proj}, proj, home), nil, home); !errors.Is(err, ErrBadSpec) {
			t.Errorf("~/.gitconfig a FIFO: %v, want a refusal", err)
		}
		unix.Unlink(filepath.Join(home, ".gitconfig"))
		_, err := gitNamedPaths(ProtectedCandidates([]string{proj}, proj, home), nil, home)
		if !errors.Is(err, ErrBadSpec) {
			t.Errorf("an include a FIFO: %v, want a refusal", err)
		}
		if _, err := expandAround(d, llRead, []string{filepath.Join(proj, "deep", "x")}, nil); err != nil {
			t.Error(err)
		}
		done <- nil
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// Let the blocked open go, so the test process can end.
		for _, f := range fifos {
			if fd, err := unix.Open(f, unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				unix.Close(fd)
			}
		}
		t.Fatal("the plan waited on a FIFO")
	}
}
