package classifier

import (
	"slices"
	"strings"
)

// RunsItsWords reports whether the command argv (argv[0] its program's base name, the rest
// its words as the shell passes them) may run, load or hand on as code what its words say: a
// shell, a wrapper or runner of another command, an interpreter, a program with options
// naming a command (find -exec, rg --pre, sdiff --diff-program, any --*-program, --*-command
// or --*-cmd: namesProgram), a subcommand that runs one (npm exec, docker run, git rebase, a
// git alias), a git configured on its line (git -c), a debugger or editor that reads
// commands. The words of any other command are its data. The audit log redacts secrets only
// in such data: what a program runs must show in the record.
func RunsItsWords(argv []string) bool {
	if len(argv) == 0 {
		return true
	}
	switch argv[0] {
	case "repeat", "nocorrect", "-", "noglob":
		return true // zsh's precommand modifiers
	}
	if strings.HasPrefix(argv[0], "=") {
		return true // zsh's =cmd is cmd's path
	}
	// Whatever the program: its value (attached or the next word) is a program it runs.
	if slices.ContainsFunc(argv[1:], namesProgram) {
		return true
	}
	for _, n := range []string{argv[0], strings.TrimRight(argv[0], "0123456789.-")} {
		n = runnerName(n)
		if isShell(n) || isWrapper(n) || runners[n] || opaqueRunners[n] || interpreters[n] ||
			neverReadOnly[n] != "" || hasCommandOptions(n) || dynamicLoader(n) {
			return true
		}
		if spec, ok := programOptions[n]; ok && hasFlag(argv[1:], spec.short, spec.long...) {
			return true
		}
		switch n {
		case "find", "sed", "make", "exec", "command", "builtin", "eval", "source", ".":
			return true
		case "git":
			return gitRunsWords(argv[1:])
		}
		if subs := subcommandRunners[n]; subs != nil {
			// Its subcommand: the first word that is neither an option nor, right after one,
			// maybe its value (docker --context c run).
			for i, w := range argv[1:] {
				if subs[w] || w == "" {
					return true
				}
				if !strings.HasPrefix(w, "-") && !strings.HasPrefix(argv[i], "-") {
					break
				}
			}
		}
	}
	return false
}

// gitRunsWords reports whether git, given words, may run a program they name: a config set
// on the line (a command-valued key, an alias), a pack program or template of its own, an
// ext:: remote, a subcommand that runs commands (rebase --exec, bisect run), or one that is
// not git's own (an alias from a config file, a git-NAME program).
func gitRunsWords(words []string) bool {
	sub := ""
	for i := 0; i < len(words); i++ {
		w := words[i]
		for _, p := range []string{"-c", "--config", "--exec-path", "-u", "--upload-pack", "--receive-pack", "--template"} {
			if strings.HasPrefix(w, p) {
				return true
			}
		}
		if strings.Contains(w, "ext::") {
			return true
		}
		switch {
		case sub != "":
		case w == "-C" || w == "--git-dir" || w == "--work-tree" || w == "--namespace":
			i++ // its value
		case !strings.HasPrefix(w, "-"):
			sub = w
		}
	}
	return sub == "" || !gitDescribed[sub] || subcommandRunners["git"][sub]
}

// namesProgram reports an option whose name says its value is a program or a command line
// the program runs, in any program: --diff-program=P, --post-command C, --extcmd, -exec,
// --rsh, --pager, -postCommand. Its value may be attached (=V) or the next word. A --no-X
// option turns X off and names nothing.
func namesProgram(w string) bool {
	if len(w) < 2 || w[0] != '-' || w == "--" {
		return false
	}
	o, _, _ := strings.Cut(strings.ToLower(strings.TrimLeft(w, "-")), "=")
	if strings.HasPrefix(o, "no-") || strings.HasPrefix(o, "no_") {
		return false
	}
	for _, end := range programOptionEnds {
		if strings.HasSuffix(o, end) {
			return true
		}
	}
	return false
}

// programOptionEnds end the names of options whose value is a program or a command line.
var programOptionEnds = []string{"program", "prog", "command", "cmd", "exec", "rsh", "shell", "pager", "editor"}

// programOptions are the options of common programs that run their value and namesProgram
// does not know by name: fd's -x, and the abbreviations getopt takes (sdiff --diff-p=P).
var programOptions = map[string]cmdOptSpec{
	"sdiff":  {long: []string{"diff-program"}},
	"diff3":  {long: []string{"diff-program"}},
	"fd":     {short: "xX", long: []string{"exec", "exec-batch"}},
	"fdfind": {short: "xX", long: []string{"exec", "exec-batch"}},
}
