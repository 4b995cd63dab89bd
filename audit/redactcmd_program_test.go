package audit

import (
	"strings"
	"testing"
)

// TestRedactCommandKeepsProgramOptions: a program an option names (sdiff --diff-program, any
// --*-program, --*-command or --*-cmd, attached or the next word) is what runs, and stays in
// the record even when it is named like a token; the same token as a plain argument is
// redacted.
func TestRedactCommandKeepsProgramOptions(t *testing.T) {
	t.Parallel()
	const prog = "ghp_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"
	for _, line := range []string{
		"sdiff --diff-program=" + prog + " a b",
		"sdiff --diff-program " + prog + " a b",
		"diff3 --diff-program=" + prog + " a b c",
		"mytool --post-command " + prog,
		"mytool --run-program=" + prog,
		"fd -x " + prog,
	} {
		if got := RedactCommand(line); got != line {
			t.Errorf("RedactCommand(%q) = %q: the program that runs is hidden", line, got)
		}
	}
	if got := RedactCommand("sdiff " + prog + " b"); strings.Contains(got, prog) {
		t.Errorf("a token sdiff only compares was kept: %q", got)
	}
}
