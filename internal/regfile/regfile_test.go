package regfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRead: a regular file is read; a FIFO nobody writes, a device, a directory and a file
// over the bound are refused at once.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte("a: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(ok, 100); err != nil || string(b) != "a: 1\n" {
		t.Errorf("regular file: %q, %v", b, err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Read(fifo, 100); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO nobody writes blocked the read")
	}
	for _, p := range []string{"/dev/zero", dir} {
		if _, err := Read(p, 100); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := Read(ok, 3); err == nil {
		t.Error("a file over the bound was read")
	}
}
