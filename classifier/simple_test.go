package classifier

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestSimpleCommand(t *testing.T) {
	cases := []struct {
		cmd  string
		want []string // nil: not simple
	}{
		{"/bin/true", []string{"/bin/true"}},
		{"ls -la src", []string{"ls", "-la", "src"}},
		{"  git   status  ", []string{"git", "status"}},
		{"go test ./... -run=TestX -count=1", []string{"go", "test", "./...", "-run=TestX", "-count=1"}},
		{`grep -n 'a b$' "c d" e''f "" ''`, []string{"grep", "-n", "a b$", "c d", "ef", "", ""}},
		{"ls # a comment", []string{"ls"}},
		{"ls;", []string{"ls"}},
		{"./script.sh arg", []string{"./script.sh", "arg"}},
		{"a#b c=d", []string{"a#b", "c=d"}},
		// bash runs these itself: builtins and keywords.
		{"true", nil}, {"echo hi", nil}, {"cd /tmp", nil}, {"exec ls", nil}, {"[ -f x ]", nil},
		{"command ls", nil}, {"time ls", nil}, {"! ls", nil}, {"eval ls", nil}, {"kill 1", nil},
		// Expansions of any kind.
		{"ls $HOME", nil}, {"ls ${x}", nil}, {"ls $(pwd)", nil}, {"ls `pwd`", nil}, {"ls *.go", nil},
		{"ls ?", nil}, {"ls [ab]", nil}, {"ls {a,b}", nil}, {"ls ~", nil}, {"ls a=~/x", nil},
		{"ls ~root", nil}, {`ls "$x"`, nil}, {`ls "a\"b"`, nil}, {`ls a\ b`, nil}, {"ls $'a\\n'", nil},
		{`ls $"msg"`, nil}, {"ls $((1+1))", nil}, {"ls <(true)", nil}, {"ls @(a|b)", nil},
		{"ls \\\n -a", []string{"ls", "-a"}}, // a line continuation, as bash reads it
		// Assignments, redirections, lists, pipes, background, compound commands.
		{"A=1 ls", nil}, {"A=1", nil}, {"ls > out", nil}, {"ls < in", nil}, // 2>&1: TestSimpleCommandStderrToStdout
		{"cat <<EOF\nx\nEOF", nil}, {"ls && ls", nil}, {"ls; ls", nil}, {"ls | wc", nil}, {"ls &", nil},
		{"(ls)", nil}, {"{ ls; }", nil}, {"if ls; then ls; fi", nil}, {"f() { ls; }", nil},
		{"[[ -f x ]]", nil}, {"coproc ls", nil}, {"ls\nls", nil},
		// Not commands at all, or not text bash would take.
		{"", nil}, {"   ", nil}, {"# only a comment", nil}, {"ls 'unterminated", nil},
		{"ls \x00", nil}, {"ls \x1b[31m", nil}, {`"" x`, nil},
	}
	for _, tc := range cases {
		got, ok := SimpleCommand(tc.cmd)
		if ok != (tc.want != nil) || !slices.Equal(got.Argv, tc.want) || got.StderrToStdout {
			t.Errorf("SimpleCommand(%q) = %+v, %v; want %q", tc.cmd, got, ok, tc.want)
		}
		if tc.want != nil {
			checkAgainstBash(t, tc.cmd, got.Argv)
		}
	}
}

func TestSimpleCommandStderrToStdout(t *testing.T) {
	cases := []struct {
		cmd    string
		want   []string // nil: not simple
		merged bool
	}{
		{"go test ./... 2>&1", []string{"go", "test", "./..."}, true},
		{"ls 2>&1 -la", []string{"ls", "-la"}, true},
		{"ls -la", []string{"ls", "-la"}, false},
		{"ls 2>&1 2>&1", nil, false}, {"ls 1>&2", nil, false}, {"ls >&2", nil, false}, {"ls 3>&1", nil, false},
		{"ls 2>&1-", nil, false}, {"ls 2>&01", nil, false}, {"ls 2>&1 | cat", nil, false}, {"ls 2>&1 > f", nil, false},
		{"ls &>f", nil, false}, {"ls 2>f", nil, false}, {"echo hi 2>&1", nil, false}, {"ls $x 2>&1", nil, false},
	}
	for _, tc := range cases {
		got, ok := SimpleCommand(tc.cmd)
		if ok != (tc.want != nil) || !slices.Equal(got.Argv, tc.want) || got.StderrToStdout != tc.merged {
			t.Errorf("SimpleCommand(%q) = %+v, %v; want %q merged=%v", tc.cmd, got, ok, tc.want, tc.merged)
		}
		if tc.want != nil {
			checkAgainstBash(t, tc.cmd, got.Argv)
		}
	}
}

// checkAgainstBash has bash parse and expand the same words (as printf's arguments) and
// compares them with argv: the words SimpleCommand returns must be the program's argv exactly.
func checkAgainstBash(t *testing.T, cmd string, argv []string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to compare with")
	}
	// A leading newline or comment line would end the printf command early.
	if trimmed := strings.TrimLeft(cmd, " \t"); strings.HasPrefix(trimmed, "\n") || strings.HasPrefix(trimmed, "#") {
		return
	}
	c := exec.Command(bash, "--noprofile", "--norc", "-c", `printf '%s\0' `+cmd)
	c.Env = []string{"PATH=/usr/bin:/bin", "HOME=/nonexistent-home"}
	c.Dir = os.TempDir()
	out, err := c.Output()
	if err != nil {
		t.Fatalf("bash on %q: %v", cmd, err)
	}
	got := strings.Split(string(bytes.TrimSuffix(out, []byte{0})), "\x00")
	if !slices.Equal(got, argv) {
		t.Fatalf("SimpleCommand(%q) = %q, but bash expands the words to %q", cmd, argv, got)
	}
}

// FuzzSimpleCommand: never a panic, never a builtin, and whatever it calls simple bash expands
// to exactly the same words.
func FuzzSimpleCommand(f *testing.F) {
	for _, s := range []string{"ls -la", `a 'b c' "d"`, "x ~", "go test ./...", "f $x", "ls\t-a # c", "go vet 2>&1"} {
		f.Add(s)
	}
	for _, c := range loadCorpus(f) {
		f.Add(c.cmd)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		sc, ok := SimpleCommand(cmd)
		argv := sc.Argv
		if !ok {
			if argv != nil {
				t.Fatalf("argv %q with ok false", argv)
			}
			return
		}
		if len(argv) == 0 || argv[0] == "" || (bashNames[argv[0]] && !strings.Contains(argv[0], "/")) {
			t.Fatalf("SimpleCommand(%q) = %q", cmd, argv)
		}
		checkAgainstBash(t, cmd, argv)
	})
}
