package worker

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
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
		res, err := doResolve(p, true)
		if err != nil || (res.Special == "" && p != "/dev/tty") {
			t.Errorf("Resolve(%s) = %+v, %v", p, res, err)
		}
	}
}

// readDecided reads p the way the Read tool does: resolve (with the fallback) first, as the
// policy's facts, then read exactly what the resolve found.
func readDecided(t *testing.T, c *Client, a ReadArgs) (*Resolved, *ReadReply, []byte, error) {
	t.Helper()
	res, err := c.ResolveRead(ctx(t), a.Path)
	if err != nil {
		t.Fatalf("resolve %s: %v", a.Path, err)
	}
	a.Decided = res
	r, out, err := c.Read(ctx(t), a)
	return res, r, out, err
}

func TestReadMissingFallsBackToUnicodeVariants(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	writeOwned(t, d+"/Screen Shot at 10.00.00\u202fAM.png", "\x89PNG\r\n\x1a\nrest")
	writeOwned(t, d+"/caf\u00e9.txt", "nfc\n") // NFC on disk
	res, r, img, err := readDecided(t, c, ReadArgs{Path: d + "/Screen Shot at 10.00.00 AM.png", Kind: KindImage})
	if err != nil || r.MediaType != "image/png" || !strings.Contains(r.Path, "\u202f") || res.Variant != r.Path {
		t.Fatalf("narrow nbsp: %+v %+v %v", res, r, err)
	}
	if want := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nrest")); string(img) != want || r.Size != 12 {
		t.Fatalf("an image's payload is its base64: got %q (size %d), want %q", img, r.Size, want)
	}
	res, _, out, err := readDecided(t, c, ReadArgs{Path: d + "/cafe\u0301.txt"}) // asked for NFD
	if err != nil || !strings.Contains(string(out), "nfc") || res.Variant != d+"/caf\u00e9.txt" || res.Resolved != res.Variant {
		t.Fatalf("NFD: %+v %q %v", res, out, err)
	}
	// Without a decision the worker opens the name asked for, never a variant of it.
	if _, _, err := c.Read(ctx(t), ReadArgs{Path: d + "/cafe\u0301.txt"}); errcode.Of(err) != errcode.ErrnoENOENT || !strings.Contains(err.Error(), "caf\u00e9.txt") {
		t.Fatalf("undecided variant: %v", err)
	}
	_, _, _, err = readDecided(t, c, ReadArgs{Path: d + "/Cafe.txt"})
	if err == nil || !strings.Contains(err.Error(), "Did you mean") || !strings.Contains(err.Error(), "caf\u00e9.txt") {
		t.Fatalf("suggestion: %v", err)
	}
	_, _, _, err = readDecided(t, c, ReadArgs{Path: d})
	if errcode.Of(err) != errcode.ErrnoEISDIR || !strings.Contains(err.Error(), "Glob") {
		t.Fatalf("dir: %v", err)
	}
}

// TestReadOpensOnlyTheDecidedFile swaps what a decided path names between the resolve and
// the read, every way an agent's own commands could: the worker must refuse, not follow.
func TestReadOpensOnlyTheDecidedFile(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	outside := ownedDir(t)
	writeOwned(t, outside+"/secret", "SECRET\n")
	tests := []struct {
		name string
		// setup makes the file decided on; swap changes it afterwards.
		setup, swap func(t *testing.T, p string)
	}{
		{"replaced by a symlink", func(t *testing.T, p string) { writeOwned(t, p, "ok\n") }, func(t *testing.T, p string) {
			os.Remove(p)
			if err := os.Symlink(outside+"/secret", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by another file", func(t *testing.T, p string) { writeOwned(t, p, "ok\n") }, func(t *testing.T, p string) {
			writeOwned(t, p+".new", "SECRET\n")
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"parent replaced by a symlink", func(t *testing.T, p string) { writeOwned(t, p, "ok\n") }, func(t *testing.T, p string) {
			dir := filepath.Dir(p)
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, dir); err != nil {
				t.Fatal(err)
			}
			writeOwned(t, outside+"/"+filepath.Base(p), "SECRET\n")
		}},
		{"created after a decision that it was missing", func(*testing.T, string) {}, func(t *testing.T, p string) {
			writeOwned(t, p, "SECRET\n")
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(d, fmt.Sprintf("d%d", i), "f.txt")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() == 0 {
				os.Chown(filepath.Dir(p), nobody, nobody)
			}
			tc.setup(t, p)
			res, err := c.ResolveRead(ctx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			tc.swap(t, p)
			_, out, err := c.Read(ctx(t), ReadArgs{Path: p, Decided: res})
			if err == nil || strings.Contains(string(out), "SECRET") {
				t.Fatalf("read a file that was not decided on: %q %v", out, err)
			}
			if res.Exists && errcode.Of(err) != errcode.Conflict {
				t.Fatalf("err = %v (%s), want a conflict", err, errcode.Of(err))
			}
		})
	}
	t.Run("unchanged", func(t *testing.T) {
		p := d + "/same.txt"
		writeOwned(t, p, "same\n")
		if _, _, out, err := readDecided(t, c, ReadArgs{Path: p}); err != nil || !strings.Contains(string(out), "same") {
			t.Fatalf("%q %v", out, err)
		}
	})
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

// TestWriteRefusesFileReadOnlyToCaller: Write and Edit replace a file by a rename, which needs
// only the directory's write bit; a file the caller may not open for writing (its own, made
// read-only, or another user's in a directory both may write) is refused, as the agent's own
// Write is, and stays as it was.
func TestWriteRefusesFileReadOnlyToCaller(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	own := d + "/own.txt"
	writeOwned(t, own, "old\n")
	if err := os.Chmod(own, 0o444); err != nil {
		t.Fatal(err)
	}
	paths := []string{own}
	if os.Geteuid() == 0 {
		// The worker runs as nobody: root's file in nobody's directory.
		other := d + "/other.txt"
		if err := os.WriteFile(other, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, other)
	}
	for _, p := range paths {
		fi, _ := os.Stat(p)
		exp := &Expect{SHA256: sha256hex([]byte("old\n")), Size: fi.Size(), MTimeNano: fi.ModTime().UnixNano()}
		if _, err := c.Write(ctx(t), p, []byte("new\n"), exp); errcode.Of(err) != errcode.PermissionDenied {
			t.Errorf("Write %s: %v, want permission_denied", p, err)
		}
		if _, err := c.Edit(ctx(t), EditArgs{Path: p, Edits: []Edit{{OldString: "old", NewString: "new"}}, Expect: exp}); errcode.Of(err) != errcode.PermissionDenied {
			t.Errorf("Edit %s: %v, want permission_denied", p, err)
		}
		if b, _ := os.ReadFile(p); string(b) != "old\n" {
			t.Errorf("%s now holds %q", p, b)
		}
	}
	// Made writable again, it is written.
	if err := os.Chmod(own, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(own)
	exp := &Expect{SHA256: sha256hex([]byte("old\n")), Size: fi.Size(), MTimeNano: fi.ModTime().UnixNano()}
	if _, err := c.Write(ctx(t), own, []byte("new\n"), exp); err != nil {
		t.Fatal(err)
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
		r, err := doResolve(tc.in, false)
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

// TestGlobAndGrepDeny: paths under a deny pattern are neither listed by Glob nor searched or
// printed by Grep, in every output mode, however the file's name is spelled.
func TestGlobAndGrepDeny(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	for _, name := range []string{"a.txt", ".env", "sub/.env", "secret/k.txt", "secret/deep/k2.txt", "we:ird-1.txt", "keep/x.txt"} {
		writeOwned(t, filepath.Join(d, name), "needle\nafter\n")
	}
	deny := []string{"/**/.env", d + "/secret", d + "/we:ird-1.txt"}
	g, err := c.Glob(ctx(t), GlobArgs{Pattern: "**/*", Root: d, Limit: 100, Deny: deny})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Paths, "\n"); g.Total != 2 || strings.Contains(got, "secret") || strings.Contains(got, ".env") {
		t.Fatalf("glob listed denied names: %+v", g)
	}
	g, err = c.Glob(ctx(t), GlobArgs{Pattern: d + "/secret/**", Root: "/", Limit: 100, Deny: deny})
	if err != nil || g.Total != 0 {
		t.Fatalf("absolute glob under a denied dir: %+v %v", g, err)
	}
	base := []string{"--hidden", "--no-heading", "--color=never"}
	for _, mode := range [][]string{{"-l"}, {"-c"}, {"-n", "-C", "1"}, {"-C", "1"}, {"-o"}, {"-l", "--glob", "*.env", "--glob", "**/secret/**"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			args := append(append(append([]string(nil), base...), mode...), "-e", "needle|after", "--", d)
			r, out, err := c.Grep(ctx(t), GrepArgs{Args: args, Dir: d, Deny: deny, Path: d})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(out), ".env") || strings.Contains(string(out), "secret") || strings.Contains(string(out), "weird") || strings.Contains(string(out), "we:ird") || bytes.IndexByte(out, 0) >= 0 {
				t.Fatalf("denied file in the output: %+v\n%q", r, out)
			}
			if mode[0] != "-l" && !strings.Contains(string(out), d+"/a.txt") {
				t.Fatalf("allowed file missing: %q", out)
			}
			if r.Total != strings.Count(string(out), "\n") {
				t.Fatalf("total %d counts dropped lines: %q", r.Total, out)
			}
		})
	}
	// The excludes alone (no output filter) keep rg out of the denied files, even after an
	// include glob of the caller's.
	args := append(append(append([]string(nil), base...), "-l", "--glob", "*.env"), rgDenyArgs(deny)...)
	_, out, err := c.Grep(ctx(t), GrepArgs{Args: append(args, "-e", "needle", "--", d), Dir: "/"})
	if err != nil || strings.Contains(string(out), ".env") || strings.Contains(string(out), "secret") {
		t.Fatalf("rg excludes: %q %v", out, err)
	}
	// rg's own separators are back: path:line:text for matches, path-line-text for context.
	_, out, err = c.Grep(ctx(t), GrepArgs{Args: append(append([]string(nil), base...), "-n", "-A", "1", "-e", "needle", "--", d+"/keep"), Deny: deny, Path: d + "/keep"})
	if err != nil || string(out) != d+"/keep/x.txt:1:needle\n"+d+"/keep/x.txt-2-after\n" {
		t.Fatalf("separators: %q %v", out, err)
	}
	// One file: rg names none, and the file searched is the decided one.
	_, out, err = c.Grep(ctx(t), GrepArgs{Args: append(append([]string(nil), base...), "-n", "-e", "needle", "--", d+"/a.txt"), Deny: deny, Path: d + "/a.txt"})
	if err != nil || string(out) != "1:needle\n" {
		t.Fatalf("one file: %q %v", out, err)
	}
	// Deny patterns without the path at the end are refused, not run unfiltered.
	if _, _, err := c.Grep(ctx(t), GrepArgs{Args: []string{"-e", "x", d}, Deny: deny, Path: d}); errcode.Of(err) != errcode.BadRequest {
		t.Fatalf("malformed: %v", err)
	}
}

func TestRgExclude(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/**/.env", "!/**/.env"},
		{"/home/u/p/secret", "!/home/u/p/secret"},
		{"/home/u/p/*.{pem,key}", `!/home/u/p/*.\{pem,key\}`},
		{"/a/x**y/**", "!/a/x*y"},
		{"/a/keys/**/**", "!/a/keys"},
		{"/**", "!/**"},
		{`/a/\**`, `!/a/\**`},
		{"/a/[^x]/[{}]", "!/a/[^x]/[{}]"},
		{"/a/[]x]", ""},
		{"/a/[x", ""},
		{"/", ""},
	}
	for _, tc := range tests {
		if got := rgExclude(tc.in); got != tc.want {
			t.Errorf("rgExclude(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestWriteGoesWhereDecided: a write goes where the decision resolved its path or nowhere. A
// symlink repointed since the decision is refused; a symlink put in place of the decided file
// is replaced, not written through; a directory on the way swapped for a symlink is refused.
// In each case the file the link now names is untouched.
func TestWriteGoesWhereDecided(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	decoy, secret, link := d+"/decoy", d+"/secret", d+"/link"
	writeOwned(t, decoy, "decoy\n")
	writeOwned(t, secret, "[core]\n")
	if err := os.Symlink(decoy, link); err != nil {
		t.Fatal(err)
	}
	res, _, err := c.Resolve(ctx(t), link)
	if err != nil || res != decoy {
		t.Fatalf("resolve the link: %q %v", res, err)
	}
	expect := &Expect{SHA256: sha256hex([]byte("decoy\n"))}
	// The link repointed after the decision.
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteDecided(ctx(t), WriteArgs{Path: link, Expect: expect, Decided: decoy}, []byte("evil\n")); errcode.Of(err) != errcode.Conflict {
		t.Errorf("a write through a repointed link: %v, want a conflict", err)
	}
	if _, err := c.Edit(ctx(t), EditArgs{Path: link, Edits: []Edit{{OldString: "[core]", NewString: "evil"}}, Expect: &Expect{SHA256: sha256hex([]byte("[core]\n"))}, Decided: decoy}); errcode.Of(err) != errcode.Conflict {
		t.Errorf("an edit through a repointed link: %v, want a conflict", err)
	}
	// The decided file itself swapped for a link to another file, past the resolve: the write
	// lands on the decided name, replacing the link.
	if err := os.Remove(decoy); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, decoy); err != nil {
		t.Fatal(err)
	}
	if _, err := writeAtomic(decoy, decoy, []byte("new\n"), nil); err != nil {
		t.Fatalf("write the decided name: %v", err)
	}
	if fi, err := os.Lstat(decoy); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the decided name after the write: %v %v, want a regular file", fi, err)
	}
	// A directory on the way swapped for a symlink to elsewhere.
	sub, elsewhere := d+"/sub", d+"/elsewhere"
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, sub); err != nil {
		t.Fatal(err)
	}
	if _, err := writeAtomic(sub+"/f", sub+"/f", []byte("x\n"), nil); errcode.Of(err) != errcode.Conflict {
		t.Errorf("a write through a directory symlink: %v, want a conflict", err)
	}
	if _, err := os.Stat(elsewhere + "/f"); err == nil {
		t.Error("the write went through the directory symlink")
	}
	if b, _ := os.ReadFile(secret); string(b) != "[core]\n" {
		t.Errorf("the file the links named changed: %q", b)
	}
}

// TestDenyThroughSymlinkedRoot: deny patterns name real paths, so a search started through a
// symlink (a link in the project to a denied tree) hides what they name there too: Grep
// prints none of its lines and Glob lists none of its names, in the requested spelling.
func TestDenyThroughSymlinkedRoot(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	writeOwned(t, d+"/notes/deep/prod.key", "APIKEY=secret-77\n")
	writeOwned(t, d+"/notes/deep/ok.txt", "APIKEY=fine\n")
	writeOwned(t, d+"/proj/.env", "APIKEY=env-secret\n")
	for old, link := range map[string]string{d + "/notes": d + "/proj/n", d + "/proj": d + "/proj/alias"} {
		if err := os.Symlink(old, link); err != nil {
			t.Fatal(err)
		}
	}
	deny := []string{d + "/notes/**/*.key", d + "/proj/.env"}
	for _, root := range []string{d + "/proj/n", d + "/proj/alias"} {
		args := []string{"--hidden", "--no-heading", "--color=never", "-n", "-e", "APIKEY", "--", root}
		_, out, err := c.Grep(ctx(t), GrepArgs{Args: args, Dir: "/", Deny: deny, Path: root})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "secret") {
			t.Errorf("grep under %s printed a denied file: %q", root, out)
		}
	}
	g, err := c.Glob(ctx(t), GlobArgs{Pattern: "n/deep/*", Root: d + "/proj", Limit: 100, Deny: deny})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(g.Paths, "\n"); strings.Contains(got, "prod.key") || !strings.Contains(got, d+"/proj/n/deep/ok.txt") {
		t.Errorf("glob through a symlinked dir: %q, want ok.txt only, as asked", got)
	}
	g, err = c.Glob(ctx(t), GlobArgs{Pattern: "**/.env", Root: d + "/proj/alias", Limit: 100, Deny: deny})
	if err != nil || g.Total != 0 {
		t.Errorf("glob of a denied name through a symlinked root: %+v %v", g, err)
	}
}

// TestGrepSearchesOnlyTheDecidedPath swaps what a decided Grep path names between the
// resolve and the search, as TestReadOpensOnlyTheDecidedFile does for Read: rg must search
// the file or directory decided on or nothing, never what the name leads to by then, in
// every output mode, with and without deny patterns.
func TestGrepSearchesOnlyTheDecidedPath(t *testing.T) {
	c := startWorker(t)
	d := ownedDir(t)
	outside := ownedDir(t)
	// Two matching lines in what was not decided on, one in what was: -c tells them apart.
	writeOwned(t, outside+"/secret", "needle SECRET\nneedle SECRET\n")
	writeOwned(t, outside+"/dir/secret", "needle SECRET\nneedle SECRET\n")
	tests := []struct {
		name string
		// setup makes the path decided on; swap changes it afterwards.
		setup, swap func(t *testing.T, p string)
	}{
		{"file replaced by a symlink", func(t *testing.T, p string) { writeOwned(t, p, "needle ok\n") }, func(t *testing.T, p string) {
			os.Remove(p)
			if err := os.Symlink(outside+"/secret", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink repointed", func(t *testing.T, p string) {
			writeOwned(t, p+".ok", "needle ok\n")
			if err := os.Symlink(p+".ok", p); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, p string) {
			if err := os.Symlink(outside+"/secret", p+".new"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"file replaced by another file", func(t *testing.T, p string) { writeOwned(t, p, "needle ok\n") }, func(t *testing.T, p string) {
			writeOwned(t, p+".new", "needle SECRET\nneedle SECRET\n")
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory symlink repointed", func(t *testing.T, p string) {
			writeOwned(t, p+".ok/f", "needle ok\n")
			if err := os.Symlink(p+".ok", p); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, p string) {
			if err := os.Symlink(outside+"/dir", p+".new"); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory replaced by a symlink", func(t *testing.T, p string) { writeOwned(t, p+"/f", "needle ok\n") }, func(t *testing.T, p string) {
			if err := os.Rename(p, p+".old"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside+"/dir", p); err != nil {
				t.Fatal(err)
			}
		}},
		{"created after a decision that it was missing", func(*testing.T, string) {}, func(t *testing.T, p string) {
			writeOwned(t, p, "needle SECRET\nneedle SECRET\n")
		}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(d, fmt.Sprintf("d%d", i), "target")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if os.Geteuid() == 0 {
				os.Chown(filepath.Dir(p), nobody, nobody)
			}
			tc.setup(t, p)
			res, err := c.ResolveInfo(ctx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			tc.swap(t, p)
			for _, mode := range [][]string{{"-n"}, {"-l"}, {"-c"}} {
				for _, deny := range [][]string{nil, {outside + "/nothing-here/**"}} {
					args := append(append([]string{"--hidden", "--no-heading", "--color=never"}, mode...), "-e", "needle", "--", p)
					_, out, err := c.Grep(ctx(t), GrepArgs{Args: args, Dir: d, Path: p, Deny: deny, Decided: res})
					// Refused, or the search of what was decided on (a link's old target).
					if strings.Contains(string(out), "SECRET") || strings.Contains(string(out), outside) || regexp.MustCompile(`(^|:)2\n`).Match(out) {
						t.Fatalf("%v deny=%v: searched what was not decided on: %q %v", mode, deny, out, err)
					}
				}
			}
		})
	}
	t.Run("unchanged", func(t *testing.T) {
		dir := filepath.Join(d, "same")
		writeOwned(t, dir+"/sub/f.txt", "needle one\nafter\n")
		writeOwned(t, dir+"/.env", "needle env\n")
		if err := os.Symlink(dir, d+"/samelink"); err != nil {
			t.Fatal(err)
		}
		deny := []string{"/**/.env"}
		for _, p := range []string{dir, d + "/samelink", dir + "/sub/f.txt"} {
			res, err := c.ResolveInfo(ctx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			for _, mode := range [][]string{{"-n", "-A", "1"}, {"-l"}, {"-c"}} {
				args := append(append([]string{"--hidden", "--no-heading", "--color=never"}, mode...), "-e", "needle", "--", p)
				_, out, err := c.Grep(ctx(t), GrepArgs{Args: args, Dir: d, Path: p, Deny: deny, Decided: res})
				if err != nil || strings.Contains(string(out), "env") || bytes.IndexByte(out, 0) >= 0 {
					t.Fatalf("%s %v: %q %v", p, mode, out, err)
				}
				want := map[string]string{"-n": p + "/sub/f.txt:1:needle one\n" + p + "/sub/f.txt-2-after\n", "-l": p + "/sub/f.txt\n", "-c": p + "/sub/f.txt:1\n"}[mode[0]]
				if p == dir+"/sub/f.txt" {
					want = map[string]string{"-n": "1:needle one\n2-after\n", "-l": p + "\n", "-c": "1\n"}[mode[0]]
				}
				if string(out) != want {
					t.Fatalf("%s %v: got %q, want %q", p, mode, out, want)
				}
			}
		}
	})
}

func TestRgExcludeUnder(t *testing.T) {
	tests := []struct{ in, root, want string }{
		{"/**/.env", "/home/u/p", "!**/.env"},
		{"/home/u/p/secret/**", "/home/u/p", "!/secret"},
		{"/home/*/p/*.key", "/home/u/p", "!/*.key"},
		{"/home/u/other/**", "/home/u/p", ""},
		{"/home/u/**/secret/**", "/home/u/p", "!**/secret"},
		{"/home/u", "/home/u/p", ""},
		{"/home/u/p", "/home/u/p", ""},
		{"/x/.env", "/", "!/x/.env"},
	}
	for _, tc := range tests {
		if got := rgExcludeUnder(tc.in, tc.root); got != tc.want {
			t.Errorf("rgExcludeUnder(%q, %q) = %q, want %q", tc.in, tc.root, got, tc.want)
		}
	}
}

// TestResolveLongPath: a path past PATH_MAX, which no call opens whole, is decided by its name
// without being followed, which cost the worker by the square of its length.
func TestResolveLongPath(t *testing.T) {
	d := t.TempDir()
	os.Symlink("/etc", d+"/l")
	long := d + "/l" + strings.Repeat("/a", 3000)
	if r, err := doResolve(long, true); err != nil || r.Resolved != long || r.Exists {
		t.Errorf("a %d-byte path: %+v %v", len(long), r, err)
	}
	if _, err := doResolve(strings.Repeat("/a", 2000), true); err != nil {
		t.Errorf("a 4000-byte path: %v", err)
	}
}

// TestSearchFromRootSkipsProc: a search of / walks everything but /proc, which no search tool
// reads (its status files would match PPid).
func TestSearchFromRootSkipsProc(t *testing.T) {
	c := startWorker(t)
	for _, root := range []string{"/", "/proc/self/root"} {
		g, err := c.Glob(ctx(t), GlobArgs{Pattern: "*/*/status", Root: root, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Paths) != 0 {
			t.Errorf("Glob */*/status from %s listed %v", root, g.Paths)
		}
	}
	root, err := c.ResolveInfo(ctx(t), "/")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--no-heading", "--color=never", "-l", "--max-depth", "3", "-e", "PPid", "--", "/"}
	for _, decided := range []*Resolved{nil, root} {
		for _, deny := range [][]string{nil, {"/nothing-here/**"}} {
			_, out, err := c.Grep(ctx(t), GrepArgs{Args: args, Dir: "/", Path: "/", Deny: deny, Decided: decided})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(out, []byte("/proc")) || bytes.Contains(out, []byte("self/status")) {
				t.Errorf("decided %v, deny %v: a search of / read /proc:\n%s", decided != nil, deny, out)
			}
		}
	}
}
