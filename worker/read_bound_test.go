package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// openGrowing opens a text file of size bytes (between the whole-read size and the hash
// limit, so Read streams and hashes it to its end), then extends it by a sparse gigabyte at
// a time until the returned stop is called, which also shrinks it back so that a read still
// running ends.
func openGrowing(t *testing.T, size int) (f *os.File, fi os.FileInfo, stop func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "grows.log")
	if err := os.WriteFile(path, []byte(strings.Repeat("0123456789abcde\n", size/16)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, fi, err := openRegular(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := int64(1); ; n++ {
			_ = os.Truncate(path, int64(size)+n<<30)
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			_ = os.Truncate(path, int64(size))
		})
	}
	t.Cleanup(stop)
	return f, fi, stop
}

// A file that keeps growing while it is read is read as it was when opened, not for as long
// as it grows.
func TestReadOfGrowingFileIsBounded(t *testing.T) {
	const size = 2 << 20
	f, fi, stop := openGrowing(t, size)
	type result struct {
		reply *ReadReply
		out   []byte
		err   error
	}
	got := make(chan result, 1)
	go func() {
		a := &ReadArgs{Path: f.Name(), Limit: 2, HashLimit: DefaultHashLimit}
		reply := &ReadReply{}
		out, err := readText(context.Background(), f, fi, a, reply)
		got <- result{reply, out, err}
	}()
	var res result
	select {
	case res = <-got:
	case <-time.After(10 * time.Second):
		stop()
		<-got
		t.Fatal("Read of a growing file still running after 10s")
	}
	stop()
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.reply.Lines != 2 || !strings.HasPrefix(string(res.out), "     1\t0123456789abcde\n") {
		t.Fatalf("lines %d, out %q", res.reply.Lines, res.out)
	}
	// Shown and hashed as it was when opened.
	if res.reply.TotalLines != size/16 || res.reply.SHA256 != sha256hex([]byte(strings.Repeat("0123456789abcde\n", size/16))) {
		t.Fatalf("total lines %d, sha256 %s: not the file as opened", res.reply.TotalLines, res.reply.SHA256)
	}
}

// A cancelled Read stops reading.
func TestReadStopsWhenCancelled(t *testing.T) {
	f, fi, stop := openGrowing(t, 2<<20)
	defer stop()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	got := make(chan error, 1)
	go func() {
		_, err := readText(c, f, fi, &ReadArgs{Path: f.Name(), Limit: 2, HashLimit: DefaultHashLimit}, &ReadReply{})
		got <- err
	}()
	select {
	case err := <-got:
		if errcode.Of(err) != errcode.Cancelled {
			t.Fatalf("want a cancelled error, got %v", err)
		}
	case <-time.After(10 * time.Second):
		stop()
		<-got
		t.Fatal("cancelled Read still running after 10s")
	}
}

// Every whole-file read stops when its context ends.
func TestReadAllLimitStopsWhenCancelled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := readAllLimit(c, f, 1<<20); errcode.Of(err) != errcode.Cancelled {
		t.Fatalf("want a cancelled error, got %v", err)
	}
}
