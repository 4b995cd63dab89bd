package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// editFile runs Edit in this process on a file holding content, as a session that read it.
func editFile(t *testing.T, content string, edits ...Edit) (string, *WriteReply, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.txt")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	reply, err := doEdit(context.Background(), &EditArgs{Path: path, Edits: edits, Expect: &Expect{SHA256: sha256hex([]byte(content))}})
	after, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return string(after), reply, err
}

// Whitespace ending old_string is matched loosely only where the file's line ends: mid-line
// it is text like any other.
func TestEditTrailingBlankOnlyAtLineEnd(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		edit          Edit
	}{
		{"space before a paren", "x = foo(bar)\n", Edit{OldString: "x = foo ", NewString: "x = baz "}},
		{"tab inside a word, replace_all", "food\n", Edit{OldString: "foo\t", NewString: "BAR", ReplaceAll: true}},
		{"no newline at the end", "food", Edit{OldString: "foo ", NewString: "BAR"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, _, err := editFile(t, tc.content, tc.edit)
			if errcode.Of(err) != errcode.NotFound || !strings.Contains(err.Error(), "old_string was not found") {
				t.Fatalf("err = %v, want not found", err)
			}
			if after != tc.content {
				t.Fatalf("file changed to %q", after)
			}
		})
	}
	for _, tc := range []struct {
		name, content string
		edit          Edit
		want          string
	}{
		{"at a line's end", "x = foo\ny\n", Edit{OldString: "x = foo ", NewString: "x = bar"}, "x = bar\ny\n"},
		{"at the file's end", "x = foo", Edit{OldString: "x = foo\t", NewString: "x = bar"}, "x = bar"},
		{"the file's own blanks", "x = foo  \n", Edit{OldString: "x = foo\t", NewString: "x = bar"}, "x = bar  \n"},
		{"only the match at a line's end", "food\nfoo\n", Edit{OldString: "foo\t", NewString: "BAR", ReplaceAll: true}, "food\nBAR\n"},
		{"a later overlapping match", "aaa\n", Edit{OldString: "aa ", NewString: "b"}, "ab\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, reply, err := editFile(t, tc.content, tc.edit)
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.want || !reply.Fuzzy {
				t.Fatalf("got %q fuzzy=%v, want %q", after, reply.Fuzzy, tc.want)
			}
		})
	}
}
