package client

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestDialWaitsForRoomInTheBacklog: with the daemon's listen backlog full (a user flooding
// its socket), a connect waits for room instead of failing at once with EAGAIN, and goes
// through as soon as the daemon takes a connection off the queue.
func TestDialWaitsForRoomInTheBacklog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	lfd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(lfd)
	if err := syscall.Bind(lfd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(lfd, 1); err != nil {
		t.Fatal(err)
	}
	// Fill the backlog with connections nobody accepts.
	for i := 0; ; i++ {
		fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer syscall.Close(fd)
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err == syscall.EAGAIN {
			break
		} else if err != nil || i > 100 {
			t.Fatalf("filling the backlog: %v after %d", err, i)
		}
	}
	done := make(chan error, 1)
	go func() {
		f, err := dialUnix(path)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the dial ended while the backlog was full: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	nfd, _, err := syscall.Accept(lfd)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(nfd)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the dial failed once there was room: %v", err)
		}
	case <-time.After(connectWait):
		t.Fatal("the dial did not go through once there was room")
	}
}
