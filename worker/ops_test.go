package worker

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

func TestReadText(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	long := strings.Repeat("é", 2500)
	writeOwned(t, d+"/a.txt", "one\r\ntwo\n"+long+"\nfour")
	r, out, err := c.Read(ctx(t), ReadArgs{Path: d + "/a.txt"})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "     1\tone" || lines[3] != "     4\tfour" || r.TotalLines != 4 || r.LongLines != 1 {
		t.Fatalf("reply %+v\n%q", r, out)
	}
	if !strings.Contains(lines[2], "line truncated at 2000") || strings.Count(lines[2], "é") != 2000 {
		t.Fatalf("long line: %q", lines[2][:40])
	}
	r, out, err = c.Read(ctx(t), ReadArgs{Path: d + "/a.txt", Offset: 2, Limit: 1})
	if err != nil || string(out) != "     2\ttwo\n" || !r.MoreLines {
		t.Fatalf("offset/limit: %+v %q %v", r, out, err)
	}
}

func TestReadSpecialRefusedInstantly(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	fifo := d + "/fifo"
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	sock := d + "/sock"
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, p := range []string{"/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/tty", "/dev/null", fifo, sock, "/proc/self/environ", "/proc/self/fd/0"} {
		start := time.Now()
		_, _, err := c.Read(ctx(t), ReadArgs{Path: p})
		if err == nil {
			t.Errorf("Read(%s) succeeded", p)
			continue
		}
		if el := time.Since(start); el > 500*time.Millisecond {
			t.Errorf("Read(%s) took %v", p, el)
		}
		if code := errcode.Of(err); code != errcode.PermissionDenied && code != errcode.ErrnoENOENT {
			t.Errorf("Read(%s): %v (%s)", p, err, code)
		}
		res, err := doResolve(p)
		if err != nil || (res.Special == "" && p != "/dev/tty") {
			t.Errorf("Resolve(%s) = %+v, %v", p, res, err)
		}
	}
}

func TestReadMissingFallsBackToUnicodeVariants(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	writeOwned(t, d+"/Screen Shot at 10.00.00\u202fAM.png", "\x89PNG\r\n\x1a\nrest")
	writeOwned(t, d+"/caf\u00e9.txt", "nfc\n") // NFC on disk
	r, _, err := c.Read(ctx(t), ReadArgs{Path: d + "/Screen Shot at 10.00.00 AM.png", Kind: KindImage})
	if err != nil || r.MediaType != "image/png" || !strings.Contains(r.Path, "\u202f") {
		t.Fatalf("narrow nbsp: %+v %v", r, err)
	}
	_, out, err := c.Read(ctx(t), ReadArgs{Path: d + "/cafe\u0301.txt"}) // asked for NFD
	if err != nil || !strings.Contains(string(out), "nfc") {
		t.Fatalf("NFD: %q %v", out, err)
	}
	_, _, err = c.Read(ctx(t), ReadArgs{Path: d + "/Cafe.txt"})
	if err == nil || !strings.Contains(err.Error(), "Did you mean") || !strings.Contains(err.Error(), "caf\u00e9.txt") {
		t.Fatalf("suggestion: %v", err)
	}
	_, _, err = c.Read(ctx(t), ReadArgs{Path: d})
	if errcode.Of(err) != errcode.ErrnoEISDIR || !strings.Contains(err.Error(), "Glob") {
		t.Fatalf("dir: %v", err)
	}
}

func TestWriteAtomicKeepsModeAndOwner(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	p := d + "/x.sh"
	writeOwned(t, p, "old\n")
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)
	if _, err := c.Write(ctx(t), p, []byte("new\n"), nil); errcode.Of(err) != errcode.Stale {
		t.Fatalf("unread overwrite: %v", err)
	}
	exp := &Expect{SHA256: sha256hex([]byte("old\n")), Size: fi.Size(), MTimeNano: fi.ModTime().UnixNano()}
	r, err := c.Write(ctx(t), p, []byte("new\n"), exp)
	if err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(p)
	st := fi2.Sys().(*syscall.Stat_t)
	if fi2.Mode().Perm() != 0o751 || (os.Geteuid() == 0 && st.Uid != nobody) || r.Created {
		t.Fatalf("mode %v uid %d reply %+v", fi2.Mode(), st.Uid, r)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Fatalf("content %q", b)
	}
	// Stale: the old expectation no longer holds.
	if _, err := c.Write(ctx(t), p, []byte("again\n"), exp); errcode.Of(err) != errcode.Stale {
		t.Fatalf("stale overwrite: %v", err)
	}
	// New file in missing parents.
	r, err = c.Write(ctx(t), d+"/a/b/c.txt", []byte("hi"), nil)
	if err != nil || !r.Created {
		t.Fatalf("create: %+v %v", r, err)
	}
	ents, _ := os.ReadDir(d)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".sbx-") {
			t.Fatalf("temp file left: %s", e.Name())
		}
	}
}

func TestResolve(t *testing.T) {
	d := t.TempDir()
	os.Mkdir(d+"/real", 0o755)
	os.Symlink(d+"/real", d+"/link")
	os.Symlink(d+"/nowhere/x", d+"/dangling")
	tests := []struct{ in, want, special string }{
		{d + "/link/f", d + "/real/f", ""},
		{d + "//link/../real", d + "/real", ""},
		{d + "/dangling", d + "/nowhere/x", ""},
		{d + "/link/new/deeper", d + "/real/new/deeper", ""},
		{"/dev/zero", "/dev/zero", SpecialDevice},
		{"/proc/1/environ", "/proc/1/environ", SpecialProc},
	}
	for _, tc := range tests {
		r, err := doResolve(tc.in)
		if err != nil || r.Resolved != tc.want || r.Special != tc.special {
			t.Errorf("resolve %s = %+v, %v; want %s %q", tc.in, r, err, tc.want, tc.special)
		}
	}
}

func TestGlobAndGrep(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	now := time.Now()
	for i, name := range []string{"a.go", "sub/b.go", "sub/deep/c.go", "d.txt", ".git/e.go", ".hg/x.go"} {
		writeOwned(t, filepath.Join(d, name), "package x // needle\n")
		mt := now.Add(time.Duration(i) * time.Minute)
		os.Chtimes(filepath.Join(d, name), mt, mt)
	}
	g, err := c.Glob(ctx(t), GlobArgs{Pattern: "**/*.go", Root: d, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if g.Total != 3 || !g.Truncated || g.Paths[0] != d+"/sub/deep/c.go" || g.Paths[1] != d+"/sub/b.go" {
		t.Fatalf("glob %+v", g)
	}
	r, out, err := c.Grep(ctx(t), GrepArgs{Args: []string{"--hidden", "--glob", "!.git", "--glob", "!.hg", "-l", "-e", "needle", "--", d}, Dir: d, SortByMTime: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Lines != 4 || strings.Contains(string(out), ".git") || !strings.HasPrefix(string(out), d+"/d.txt\n") {
		t.Fatalf("grep %+v %q", r, out)
	}
}

func TestConcurrentReadsMultiplex(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	for i := 0; i < 8; i++ {
		writeOwned(t, filepath.Join(d, string(rune('a'+i))), strings.Repeat(string(rune('a'+i)), 1000))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for i := 0; i < 80; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			name := string(rune('a' + i%8))
			_, out, err := c.Read(ctx(t), ReadArgs{Path: filepath.Join(d, name)})
			if err == nil && !strings.Contains(string(out), strings.Repeat(name, 1000)) {
				err = errors.New("wrong answer for " + name)
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkRead4K compares a 4 KB Read through the worker protocol with os.ReadFile.
func BenchmarkRead4K(b *testing.B) {
	c := startWorker(b)
	d := ownedDir(b)
	p := d + "/f.txt"
	writeOwned(b, p, strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!\n", 64))
	b.Run("worker", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, _, err := c.Read(ctx(b), ReadArgs{Path: p}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.ReadFile", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
