package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// A path ending in / names a directory, as the kernel reads it: a file's name with a slash
// is not that file, and a write there makes no file.
func TestTrailingSlashRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "e.txt")
	if err := os.WriteFile(file, []byte("e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	read := func(p string) error { _, _, err := doRead(bg, &ReadArgs{Path: p}); return err }
	write := func(p string) error { _, err := doWrite(bg, &WriteArgs{Path: p}, []byte("x")); return err }
	edit := func(p string) error {
		_, err := doEdit(bg, &EditArgs{Path: p, Edits: []Edit{{OldString: "", NewString: "x"}}})
		return err
	}
	for _, tc := range []struct {
		name string
		op   func(string) error
		path string
		want errcode.Code
	}{
		{"read a file's name with a slash", read, file + "/", errcode.ErrnoENOTDIR},
		{"read a directory with a slash", read, filepath.Join(dir, "sub") + "/", errcode.ErrnoEISDIR},
		{"read a missing name with a slash", read, filepath.Join(dir, "none") + "/", errcode.ErrnoENOENT},
		{"write a new name with a slash", write, filepath.Join(dir, "newdir") + "/", errcode.ErrnoEISDIR},
		{"write a file's name with a slash", write, file + "/", errcode.ErrnoENOTDIR},
		{"edit a file's name with a slash", edit, file + "/", errcode.ErrnoENOTDIR},
		{"edit creating a new name with a slash", edit, filepath.Join(dir, "newdir2") + "/", errcode.ErrnoEISDIR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(tc.path); errcode.Of(err) != tc.want {
				t.Fatalf("err = %v (%s), want %s", err, errcode.Of(err), tc.want)
			}
		})
	}
	for _, n := range []string{"newdir", "newdir2"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Fatalf("%s was made: %v", n, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "e\n" {
		t.Fatalf("e.txt changed: %q", b)
	}
	// Without the slash, as before.
	if _, _, err := doRead(bg, &ReadArgs{Path: file}); err != nil {
		t.Fatal(err)
	}
}
