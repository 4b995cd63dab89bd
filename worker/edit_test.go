package worker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

func TestApplyEdits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		edits   []Edit
		want    string
		code    errcode.Code
		fuzzy   bool
	}{
		{name: "exact once", content: "a\nb\nc\n", edits: []Edit{{OldString: "b", NewString: "B"}}, want: "a\nB\nc\n"},
		{name: "same text", content: "a", edits: []Edit{{OldString: "a", NewString: "a"}}, code: errcode.Validation},
		{name: "not found", content: "a", edits: []Edit{{OldString: "zzz", NewString: "y"}}, code: errcode.NotFound},
		{name: "ambiguous", content: "x x x", edits: []Edit{{OldString: "x", NewString: "y"}}, code: errcode.Conflict},
		{name: "replace all", content: "x x x", edits: []Edit{{OldString: "x", NewString: "y", ReplaceAll: true}}, want: "y y y"},
		{name: "curly quotes kept", content: "say \u201chello\u201d to \u2018them\u2019\n",
			edits: []Edit{{OldString: `say "hello" to 'them'`, NewString: `say "bye" to 'them'`}},
			want:  "say \u201cbye\u201d to \u2018them\u2019\n", fuzzy: true},
		{name: "trailing whitespace", content: "func f() {   \n\treturn 1\t\n}\n",
			edits: []Edit{{OldString: "func f() {\n\treturn 1\n}", NewString: "func f() {\n\treturn 2\n}"}},
			want:  "func f() {\n\treturn 2\n}\n", fuzzy: true},
		{name: "multi all or nothing", content: "a b", edits: []Edit{{OldString: "a", NewString: "A"}, {OldString: "q", NewString: "Q"}}, code: errcode.NotFound},
		{name: "multi in order", content: "a b", edits: []Edit{{OldString: "a", NewString: "c"}, {OldString: "c b", NewString: "done"}}, want: "done"},
		{name: "create from empty", content: "", edits: []Edit{{OldString: "", NewString: "new"}}, want: "new"},
		{name: "empty old on content", content: "x", edits: []Edit{{OldString: "", NewString: "new"}}, code: errcode.Validation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := ApplyEdits("f.txt", tc.content, tc.edits)
			if tc.code != "" {
				if errcode.Of(err) != tc.code {
					t.Fatalf("err = %v (%s), want code %s", err, errcode.Of(err), tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Content != tc.want || res.Fuzzy != tc.fuzzy {
				t.Fatalf("got %q fuzzy=%v, want %q fuzzy=%v", res.Content, res.Fuzzy, tc.want, tc.fuzzy)
			}
		})
	}
}

func TestAmbiguousErrorCounts(t *testing.T) {
	_, err := ApplyEdits("f.txt", "x x x", []Edit{{OldString: "x", NewString: "y"}})
	if err == nil || !strings.Contains(err.Error(), "3 times") || !strings.Contains(err.Error(), "replace_all") {
		t.Fatalf("err = %v", err)
	}
}

func TestSnippet(t *testing.T) {
	content := strings.Repeat("line\n", 20)
	start := strings.Index(content, "line") + 5*10
	got := Snippet(content, start, start+4, 2, 40)
	if !strings.HasPrefix(got, "     9\tline\n") || !strings.Contains(got, "    13\tline\n") {
		t.Fatalf("snippet:\n%s", got)
	}
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pat, path string
		want      bool
	}{
		{"**/*.go", "a/b/c.go", true},
		{"**/*.go", "c.go", true},
		{"*.go", "a/c.go", false},
		{"src/**/x_*.ts", "src/x_1.ts", true},
		{"src/**/x_*.ts", "src/a/b/x_1.ts", true},
		{"src/*/x.ts", "src/a/b/x.ts", false},
	}
	for _, tc := range tests {
		if got := MatchGlob(strings.Split(tc.pat, "/"), strings.Split(tc.path, "/")); got != tc.want {
			t.Errorf("MatchGlob(%q, %q) = %v", tc.pat, tc.path, got)
		}
	}
	if got, ok := ExpandBraces("src/**/*.{ts,tsx}", 8); !ok || len(got) != 2 || got[1] != "src/**/*.tsx" {
		t.Errorf("ExpandBraces = %v", got)
	}
	if got, ok := ExpandBraces("{a,b}/{c,d}", 4); !ok || len(got) != 4 {
		t.Errorf("ExpandBraces nested = %v", got)
	}
	if got, ok := ExpandBraces("{a,b}/{c,d}", 3); ok || got != nil {
		t.Errorf("ExpandBraces past its limit = %v, %v", got, ok)
	}
}

// TestExpandBracesBounded: forty {a,b} groups name 2^40 patterns; the expansion stops at its
// limit with work of that size, where building them all would take the daemon's memory.
func TestExpandBracesBounded(t *testing.T) {
	done := make(chan bool)
	go func() {
		_, ok := ExpandBraces(strings.Repeat("{a,b}", 40), MaxBracePatterns)
		done <- ok
	}()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("2^40 patterns expanded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the expansion did not stop at its limit")
	}
}

// TestExpandBracesGroupsBounded: each group is a level of the expansion holding a copy of the
// pattern, so many single-alternative groups ({a}{a}…) cost memory by the square of the
// pattern's length without passing the count limit; past maxBraceGroups, or past the bytes its
// patterns may hold, the expansion is refused whole before it starts.
func TestExpandBracesGroupsBounded(t *testing.T) {
	for _, p := range []string{strings.Repeat("{a}", 60000), strings.Repeat("{", 1000) + "a" + strings.Repeat("}", 1000),
		"{a,b}" + strings.Repeat("x", 8<<10)} {
		allocs := testing.AllocsPerRun(1, func() {
			if _, ok := ExpandBraces(p, MaxBracePatterns); ok {
				t.Errorf("%.20q…: expanded", p)
			}
		})
		if allocs > 2 {
			t.Errorf("%.20q…: %v allocations before refusing", p, allocs)
		}
	}
	if got, ok := ExpandBraces(strings.Repeat("{a}", maxBraceGroups), MaxBracePatterns); !ok || len(got) != 1 {
		t.Errorf("%d groups: %v %v", maxBraceGroups, got, ok)
	}
}

func TestSnippetEdges(t *testing.T) {
	if got := Snippet("a\nb\nc", 0, 1, 4, 40); got != "     1\ta\n     2\tb\n     3\tc\n" {
		t.Fatalf("start: %q", got)
	}
	if got := Snippet("a\n\nc\n", 4, 5, 1, 40); got != "     2\t\n     3\tc\n" {
		t.Fatalf("end: %q", got)
	}
}

// matchGlobByEverySplit is MatchGlob as it was: every split at every "**", exponential in
// their number, kept as the reference its replacement must agree with.
func matchGlobByEverySplit(pat, rel []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(rel); i++ {
				if matchGlobByEverySplit(pat[1:], rel[i:]) {
					return true
				}
			}
			return false
		}
		if len(rel) == 0 || !matchSegment(pat[0], rel[0]) {
			return false
		}
		pat, rel = pat[1:], rel[1:]
	}
	return len(rel) == 0
}

// FuzzMatchGlob: MatchGlob agrees with trying every split, on patterns and paths of a few
// segments drawn from a small alphabet (so matches are common).
func FuzzMatchGlob(f *testing.F) {
	f.Add("**/a/**/b", "x/a/y/a/b")
	f.Add("a/**/**/*", "a")
	f.Add("**", "")
	f.Add("*/**/a?", "q/ab/ab")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 40 || len(name) > 40 {
			return
		}
		pat, rel := strings.Split(pattern, "/"), strings.Split(name, "/")
		if name == "" {
			rel = nil
		}
		if got, want := MatchGlob(pat, rel), matchGlobByEverySplit(pat, rel); got != want {
			t.Fatalf("MatchGlob(%q, %q) = %v; trying every split says %v", pattern, name, got, want)
		}
	})
}

// TestMatchGlobIsNotExponential: a name 300 levels deep against twelve "**" (which trying
// every split would take years over) is matched, and refused, at once.
func TestMatchGlobIsNotExponential(t *testing.T) {
	rel := strings.Split(strings.Repeat("a/", 300)+"f", "/")
	pat := strings.Split(strings.Repeat("**/a/", 12)+"b", "/")
	if MatchGlob(pat, rel) {
		t.Fatal("a/…/f matched a pattern ending in b")
	}
	pat[len(pat)-1] = "f"
	if !MatchGlob(pat, rel) {
		t.Fatal("a/…/f did not match **/a/…/f")
	}
}

// TestSearchIsBounded: a Grep that would run for minutes (a 1 TiB sparse file) is stopped at
// searchTimeout, and says so.
func TestSearchIsBounded(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("rg is not installed (make deps installs it)")
	}
	old := searchTimeout
	searchTimeout = 200 * time.Millisecond
	t.Cleanup(func() { searchTimeout = old })
	sparse := filepath.Join(t.TempDir(), "sparse")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 1<<40); err != nil {
		t.Skipf("no sparse file of 1 TiB here: %v", err)
	}
	_, err := searchBounded(context.Background(), "Grep", func(ctx context.Context) (*GrepReply, error) {
		r, _, err := doGrep(ctx, &GrepArgs{Args: []string{"-e", "x", "--", sparse}, Dir: "/"})
		return r, err
	})
	if errcode.Of(err) != errcode.Timeout || !strings.Contains(err.Error(), "ran past") {
		t.Fatalf("a Grep of a 1 TiB sparse file: %v; want it stopped at the search timeout", err)
	}
}
