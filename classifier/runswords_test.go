package classifier

import (
	"slices"
	"strings"
	"testing"
)

// TestRunsItsWords: the commands whose words may be a program or code, and those whose words
// are data only.
func TestRunsItsWords(t *testing.T) {
	for line, want := range map[string]bool{
		"bash -c x": true, "zsh5 x": true, "timeout 5 x": true, "sshpass -p x ssh h": true,
		"python3.12 x": true, "node x": true, "find . -exec x": true, "sed e": true, "make x": true,
		"xargs x": true, "env x": true, "sudo x": true, "valgrind.bin x": true, "ld-linux-x86-64.so.2 x": true,
		"rg --pre x": true, "tar -I x": true, "npm exec x": true, "docker run img x": true, "docker --context c run img x": true, "npm --prefix d exec x": true,
		"git -c core.sshCommand=x fetch": true, "git --config-env=a=b x": true, "git rebase --exec x": true,
		"git myalias x": true, "git clone ext::sh": true, "git": true, "": true,
		"repeat 3 x": true, "nocorrect x": true, "=bash x": true,
		"curl -H x": false, "echo x": false, "npm config set k x": false, "docker login -p x": false,
		"git clone https://t@h/r": false, "git -C d push origin x": false, "gh api x": false, "mysql -px": false,
	} {
		if got := RunsItsWords(strings.Fields(line)); got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}

// TestProgramOptionsRun: an option that names a program the command runs, of any program
// (--*-program, --*-command, --*-cmd, attached or with the next word) or of a common tool that
// spells it otherwise, makes the command's words ones that run (so the audit log does not
// redact a program named like a token, ghp_…), and Classify reads what it names as a
// command too, so a deny of rm meets it (or, for fd, takes the command for one that may run
// anything). A --no-X option and a word that only contains such a name do not.
func TestProgramOptionsRun(t *testing.T) {
	t.Parallel()
	runs := map[string][]string{
		"sdiff --diff-program=rm a b":                    {"sdiff", "--diff-program=rm", "a", "b"},
		"sdiff --diff-program rm a b":                    {"sdiff", "--diff-program", "rm", "a", "b"},
		"sdiff --diff-p=rm a b":                          {"sdiff", "--diff-p=rm", "a", "b"},
		"diff3 --diff-program=rm a b c":                  {"diff3", "--diff-program=rm", "a", "b", "c"},
		"mytool --run-program=rm a":                      {"mytool", "--run-program=rm", "a"},
		"mytool --post-command 'rm -f x'":                {"mytool", "--post-command", "rm -f x"},
		"mytool --post-command='rm -f x'":                {"mytool", "--post-command=rm -f x"},
		"mytool --on-exit-cmd 'rm -f x' y":               {"mytool", "--on-exit-cmd", "rm -f x", "y"},
		"mytool -postCommand 'rm -f x'":                  {"mytool", "-postCommand", "rm -f x"},
		"mytool --extcmd=rm":                             {"mytool", "--extcmd=rm"},
		"rsync -e 'rm -f x' a h:b":                       {"rsync", "-e", "rm -f x", "a", "h:b"},
		"rsync --rsh='rm -f x' a h:b":                    {"rsync", "--rsh=rm -f x", "a", "h:b"},
		"tar --use-compress-program=rm -cf a":            {"tar", "--use-compress-program=rm", "-cf", "a"},
		"tar -I rm -cf a b":                              {"tar", "-I", "rm", "-cf", "a", "b"},
		"tar --to-command='rm -f x' -xf a":               {"tar", "--to-command=rm -f x", "-xf", "a"},
		"tar --checkpoint-action=exec='rm -f x' -cf a b": {"tar", "--checkpoint-action=exec=rm -f x", "-cf", "a", "b"},
		"find . -exec rm {} +":                           {"find", ".", "-exec", "rm", "{}", "+"},
		"git difftool --extcmd='rm -f x'":                {"git", "difftool", "--extcmd=rm -f x"},
		"man -P 'rm -f x' ls":                            {"man", "-P", "rm -f x", "ls"},
		"fd -x rm":                                       {"fd", "-x", "rm"},
		"fd -Hx rm":                                      {"fd", "-Hx", "rm"},
		"fd . --exec-batch rm":                           {"fd", ".", "--exec-batch", "rm"},
	}
	for line, argv := range runs {
		if !RunsItsWords(argv) {
			t.Errorf("RunsItsWords(%q) = false: its words name a program it runs", argv)
		}
		c := Classify(line, Options{Cwd: "/w", Home: "/h"})
		if c.ReadOnly || !slices.ContainsFunc(c.Subcommands, func(s Subcommand) bool { return s.Opaque || len(s.Argv) > 0 && s.Argv[0] == "rm" }) {
			var subs []string
			for _, s := range c.Subcommands {
				subs = append(subs, strings.Join(s.Argv, " "))
			}
			t.Errorf("Classify(%q): read-only %v, commands %q: rm is not among them", line, c.ReadOnly, subs)
		}
	}
	for _, argv := range [][]string{
		{"sdiff", "a", "b"}, {"diff3", "a", "b", "c"}, {"fd", "-H", "pattern"}, {"journalctl", "--no-pager", "-u", "x"},
		{"git", "--no-pager", "log", "x"}, {"gh", "repo", "create", "--description", "x"}, {"mytool", "--commands", "x"},
		{"curl", "-H", "x", "https://h/program"}, {"echo", "command", "cmd", "program"},
	} {
		if RunsItsWords(argv) {
			t.Errorf("RunsItsWords(%q) = true: no word names a program", argv)
		}
	}
}
