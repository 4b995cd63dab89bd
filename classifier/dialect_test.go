package classifier

import (
	"slices"
	"strings"
	"testing"
)

// TestShellDialects: text bash reads as data but zsh or dash runs is refused for that shell
// (checked against the real shells by difftest), and what every shell reads alike stays
// read-only.
func TestShellDialects(t *testing.T) {
	for _, tc := range []struct {
		cmd string
		// readOnly in bash, zsh and sh
		bash, zsh, sh bool
	}{
		{"ls -la", true, true, true},
		{"git status && git log --oneline -3", true, true, true},
		{`grep -E "(a|b)" a.txt`, true, true, true},
		{"echo 'a(b)' \"c(d)\"", true, true, true},
		{"echo $$ a$", true, true, true},
		{"ls *(e:'touch x':)", true, false, true},
		{"ls *.txt(e.'id > x'.)", false, false, false},
		{"sort *(P:-ox:)", false, false, false},
		{"ls *(#qe:'touch x':)", true, false, true},
		{"echo ${x:-*(e:'touch x':)}", true, false, true},
		{"x='*(e:touch x:)'; ls $~x", true, false, true},
		{"x='-o x'; sort $=x a.txt", true, false, true},
		{"echo \"$~x\" $^y $+z", true, false, true},
		{"echo $'a\\' ; touch x ; # '", true, true, false},
		{"cat $'x\\'; touch x #'", true, true, false},
		{"((x))", true, true, false},
		// dash reads &> as & (run in the background) and a redirection of the words after
		// it, which run: ./evil.sh is a command there.
		{"ls &>/dev/null ./evil.sh", true, true, false},
		{"cat &>>/dev/null ./evil.sh", true, true, false},
		{"ls >/dev/null 2>&1 ./evil.sh", true, true, true},
		// [[ is a command dash does not have, and its > a redirection it makes first: the
		// file is created or emptied.
		{"[[ a > notes.txt ]]", true, true, false},
		{"[[ -n x ]] && ls", true, true, false},
		// dash runs the words after || as a command once [[ is not found.
		{"[[ -z x || ./evil.sh ]]", true, true, false},
		{"[ -n x ] && ls", true, true, true},
		// EXTENDED_GLOB: ^ and # are glob operators to zsh, characters to bash.
		{"find sub -delet#e", true, false, true},
		{"find . ^a", true, false, true},
		{"cat se^x/f", true, false, true},
		{"git log HEAD^", true, false, true},
		{"echo $x#", true, false, true},
		{"echo ${x:-^a}", true, false, true},
		{"git log 'HEAD^' \\^x \"a#b\"", true, true, true},
		{"echo $# ${#} ${#x} ${x#a} ${x##*/} $((16#ff))", true, true, true},
		{"[[ $x =~ ^a# ]] && case $x in ^a) ls;; esac", true, true, false},
		// <N-M> is zsh's numeric glob, where bash reads an input redirection from N-M and
		// what follows the >: `cat ~/.ssh/id_ed<->&2` prints ~/.ssh/id_ed25519 in zsh.
		{"cat key<->&2", true, false, true},
		{"cat key<0-9>&2", true, false, true},
		{"cat <1-20>/dev/null", true, false, true},
		{"cat < 1-2 >/dev/null", true, true, true},
		{"cat <'1-2'>/dev/null", true, true, true},
		// zsh subscripts $name[...] without braces, arithmetically: $_ is the last word
		// before, and its subscript $(...) runs. To bash [_] is a glob after $HOME.
		{"echo 'path[$(touch x)1]'; echo $HOME[_]", true, false, true},
		{"echo 'path[$(touch x)1]'; echo \"$HOME[_]\"", true, false, true},
		{"echo $x[y] $1[_]", true, false, true},
		{"echo $x[1] \"$x[-1]\" $x[2,3] ${x}[_] $x\\[_] '$x[_]'", true, true, true},
	} {
		for _, sh := range []struct {
			name string
			want bool
		}{{ShellBash, tc.bash}, {ShellZsh, tc.zsh}, {ShellSh, tc.sh}} {
			opts := testOpts
			opts.Shell = sh.name
			c := Classify(tc.cmd, opts)
			if c.ReadOnly != sh.want {
				t.Errorf("%s: %q read-only %v (%s), want %v", sh.name, tc.cmd, c.ReadOnly, c.Reason, sh.want)
			}
			if !sh.want && tc.bash && c.ParseError == nil {
				// Refused for the shell alone: no allow rule may match it either.
				t.Errorf("%s: %q refused without a parse error, so an allow rule could still match it", sh.name, tc.cmd)
			}
		}
	}
}

// TestUnknownShellUnclassified: a shell the classifier cannot read leaves every command
// unparsed, even one every shell reads alike.
func TestUnknownShellUnclassified(t *testing.T) {
	for _, sh := range []string{"fish", "ksh", "csh", "Bash", " zsh"} {
		opts := testOpts
		opts.Shell = sh
		c := Classify("ls", opts)
		if c.ReadOnly || c.ParseError == nil || c.Reason != reasonUnknownShell {
			t.Errorf("%q: read-only %v, reason %s, parse error %v; want unclassified", sh, c.ReadOnly, c.Reason, c.ParseError)
		}
	}
}

// TestNestedScriptInItsShell: a script given to sh or zsh is read as that shell reads it,
// so a command it hides from bash's reading still meets deny rules (the command is opaque);
// a shell the classifier cannot read is opaque whatever the script.
func TestNestedScriptInItsShell(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		opaque bool
	}{
		{`sh -c "echo \$'a\\' ; rm -rf x ; # '"`, true},
		{`dash -c "echo \$'a\\' ; rm -rf x ; # '"`, true},
		{`busybox sh -c "echo \$'a\\' ; rm -rf x ; # '"`, true},
		{`watch -n1 "echo \$'a\\' ; rm -rf x ; # '"`, true},
		{`zsh -c "ls *(e:'rm -rf x':)"`, true},
		{`ksh -c 'ls'`, true},
		// script -c runs its command with $SHELL, which may be zsh or dash.
		{`script -qc "ls *(e:'rm -rf x':)" /dev/null`, true},
		{`su -c "echo \$'a\\' ; rm -rf x ; # '"`, true},
		{`script -qc 'ls -la' /dev/null`, false},
		{`fish -c 'ls'`, true},
		{`bash -c "echo \$'a\\' ; rm -rf x ; # '"`, false},
		{`sh -c 'ls -la'`, false},
		{`zsh -c 'ls -la'`, false},
	} {
		c := Classify(tc.cmd, testOpts)
		opaque := false
		for _, s := range c.Subcommands {
			opaque = opaque || s.Opaque
		}
		if opaque != tc.opaque {
			t.Errorf("%q: opaque %v, want %v:\n%s", tc.cmd, opaque, tc.opaque, c.Format())
		}
		if c.ReadOnly {
			t.Errorf("%q: a shell running a script is never read-only", tc.cmd)
		}
	}
	// eval runs its text in the shell it is in.
	opts := testOpts
	opts.Shell = ShellZsh
	c := Classify(`eval "ls *(e:'rm -rf x':)"`, opts)
	if c.ReadOnly || !strings.Contains(c.Format(), "opaque") {
		t.Errorf("zsh eval of a glob qualifier: read-only %v, want opaque:\n%s", c.ReadOnly, c.Format())
	}
}

// TestRunnersShowTheirCommand: a program that runs a command after arguments of its own
// shows that command to deny and ask rules, wherever its arguments let it start; a command
// known only at run time makes it opaque.
func TestRunnersShowTheirCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		opaque bool
	}{
		{"taskset 1 rm -rf x", false}, {"taskset -c 0 rm -rf x", false}, {"chrt -f 10 rm -rf x", false},
		{"flock /tmp/l rm -rf x", false}, {"flock /tmp/l -c 'rm -rf x'", false}, {"strace -o /dev/null rm -rf x", false},
		{"script -qc 'rm -rf x' /dev/null", false}, {"ssh h 'rm -rf x'", false}, {"uv run rm -rf x", false},
		{"busybox rm -rf x", false}, {"/usr/bin/ionice -c3 nice rm -rf x", false},
		{"flock /tmp/l $CMD", true}, {"taskset 1 " + strings.Repeat("a ", maxRunnerWords) + "rm -rf x", false},
	} {
		c := Classify(tc.cmd, testOpts)
		found, opaque := false, false
		for _, s := range c.Subcommands {
			opaque = opaque || s.Opaque
			found = found || len(s.DenyPrefix) > 0 && s.DenyPrefix[0] == "rm" && s.Nested
		}
		if opaque != tc.opaque || !tc.opaque && !found {
			t.Errorf("%q: opaque %v, rm seen %v; want opaque %v:\n%s", tc.cmd, opaque, found, tc.opaque, c.Format())
		}
	}
}

// TestZshLowerCaseSpecials: zsh's path is PATH (`path=~/evil; ls` runs ~/evil/ls), and its
// other lower-case specials change what runs or where cd goes; bash has none, so there a
// lower-case name stays free to set.
func TestZshLowerCaseSpecials(t *testing.T) {
	for _, cmd := range []string{
		"path=/tmp/evil; ls",
		"fpath=/tmp/evil; ls",
		"cdpath=/tmp; cd evil && ls",
		"read path <<< /tmp/evil; ls",
		"read -t path <<< /tmp/evil; ls",
		"read -n path <<< /tmp/evil; ls",
		"printf -v path /tmp/evil; ls",
		"for path in /tmp/evil; do ls; done",
		"echo ${path:=/tmp/evil}; ls",
		"ls {path}</dev/null; ls",
	} {
		for _, sh := range []string{ShellBash, ShellZsh} {
			opts := testOpts
			opts.Shell = sh
			c := Classify(cmd, opts)
			if want := sh == ShellBash; c.ReadOnly != want {
				t.Errorf("%s: %q read-only %v (%s), want %v", sh, cmd, c.ReadOnly, c.Reason, want)
			}
		}
	}
}

// TestZshMathRunsCode: zsh evaluates many builtin arguments as math (printf's %d, read's and
// test's -t, test's -eq, shift), and a subscript's expansions run when the name is looked up:
// `printf '%d' 'path[$(id)]'` runs id in zsh, so it is never read-only there. bash reads
// the same words as text.
func TestZshMathRunsCode(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{
		`printf '%d' 'path[$(touch x)]'`,
		`printf -- '%i' 'argv[$(id)]'`,
		`printf '%*d' 'signals[$(id)]' 1`,
		"printf '%d' 'fpath[`id`]'",
		`read -t 'path[$(id)]' x < README.md`,
		`read -n 'pipestatus[$(id)]' x < README.md`,
		`test -t 'path[$(id)]'`,
		`[ -t 'path[$(id)]' ]`,
		`[[ -t 'path[$(id)]' ]]`,
		`echo $(printf '%d' 'path[$(id)]')`,
		`x='path[$(id)]'; printf %d x`,
		`read x < f; printf '%d' x`,
		`read x < f; test x -eq 1`,
	} {
		if c := Classify(cmd, Options{Cwd: "/home/u/proj", Shell: ShellZsh}); c.ReadOnly {
			t.Errorf("zsh: %s: read-only", cmd)
		}
	}
	for _, cmd := range []string{`printf '%d' 5`, `printf '%s\n' hello`, `grep -E 'a[bc]' f`, `for f in a b; do echo $f; done`, `read x < f; printf '%s' x`} {
		if c := Classify(cmd, Options{Cwd: "/home/u/proj", Shell: ShellZsh}); !c.ReadOnly {
			t.Errorf("zsh: %s: %s, want read-only", cmd, c.Reason)
		}
	}
}

// TestZshOptionsAndRunnersAreOpaque: in zsh, an option the line sets changes how the rest is
// read (promptsubst runs $(…) in print -P's argument), zpty runs a command string and zargs
// puts the words before -- after its command: no word shows what runs.
func TestZshOptionsAndRunnersAreOpaque(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]bool{
		`setopt promptsubst; print -P '$(curl x)'`: true,
		`unsetopt nomatch; ls`:                     true,
		`set -o promptsubst; print -P '$(curl x)'`: true,
		`zmodload zsh/zpty; zpty -b x 'curl x'`:    true,
		`autoload -U zargs; zargs -- push -- git`:  true,
		`fpath=(.); autoload -U f; f`:              true,
		`set -e; ls`:                               false,
		`set -eux; ls`:                             false,
		`print -P '%F{red}x%f'`:                    false,
	} {
		c := Classify(cmd, Options{Shell: ShellZsh})
		if got := slices.ContainsFunc(c.Subcommands, func(s Subcommand) bool { return s.Opaque }); got != want {
			t.Errorf("%q in zsh: opaque %v, want %v\n%s", cmd, got, want, c.Format())
		}
	}
}

// TestFindRunningWhatItFinds: find -exec {} … runs each file it finds as the program, which no
// word names; a program of its own with {} as an operand is that program.
func TestFindRunningWhatItFinds(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]bool{
		`find . -name g -exec {} push \;`:     true,
		`find . -name x -execdir ./{} \;`:     true,
		`find . -type f -ok '{}' +`:           true,
		`find . -name x -exec grep -l y {} +`: false,
		`find . -name '*.sh' -exec sh {} \;`:  true,
		`find . -name x -exec ls {} \;`:       false,
		`find . -exec {""} push \;`:           true,
		`find . -exec \{\} push \;`:           true,
		`find . -exec env {} push \;`:         true,
		`find . -exec nice -n 5 {} push \;`:   true,
	} {
		c := Classify(cmd, Options{})
		if got := slices.ContainsFunc(c.Subcommands, func(s Subcommand) bool { return s.Opaque }); got != want {
			t.Errorf("%q: opaque %v, want %v\n%s", cmd, got, want, c.Format())
		}
	}
}

// TestZshFdMoveIsAFile: zsh has no N- form of a duplication: >&1- writes a file named 1-, a
// write; bash moves the descriptor.
func TestZshFdMoveIsAFile(t *testing.T) {
	t.Parallel()
	for shell, readOnly := range map[string]bool{ShellZsh: false, ShellBash: true} {
		o := testOpts
		o.Shell = shell
		if c := Classify("echo hi >&1-", o); c.ReadOnly != readOnly {
			t.Errorf("%s: echo hi >&1-: read-only %v (%s), want %v", shell, c.ReadOnly, c.Reason, readOnly)
		}
	}
}
