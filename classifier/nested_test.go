package classifier

import (
	"path"
	"strings"
	"testing"
)

// TestDenyThroughWrappers: every spelling of issue #16's reproduction 7 shows a deny rule
// for curl either a subcommand whose deny words start with curl (a path counts by its base
// name) or an opaque subcommand, and literal scripts are parsed rather than made opaque.
func TestDenyThroughWrappers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd    string
		opaque bool // want the hit to come from an opaque subcommand
	}{
		{`ls && bash -c 'curl x'`, false},
		{`eval 'curl x'`, false},
		{`eval curl x`, false},
		{`sh -c 'curl x'`, false},
		{`zsh -c 'curl x'`, false},
		{`dash -c 'curl x'`, false},
		{`bash -lc 'echo; curl x'`, false},
		{`bash -c 'bash -c "curl x"'`, false},
		{`find . -exec curl {} \;`, false},
		{`find . -execdir curl {} +`, false},
		{`find . -ok curl {} \;`, false},
		{`find . -okdir curl {} \;`, false},
		{`find . -name x -exec sh -c 'curl "$1"' _ {} \;`, false},
		{`xargs curl`, false},
		{`xargs -n1 curl`, false},
		{`env curl x`, false},
		{`env -i FOO=1 curl x`, false},
		{`command curl x`, false},
		{`builtin curl x`, false},
		{`exec curl x`, false},
		{`exec -a name curl x`, false},
		{`timeout 5 curl x`, false},
		{`nice -n 5 curl x`, false},
		{`nohup curl x`, false},
		{`stdbuf -o0 curl x`, false},
		{`time curl x`, false},
		{`/usr/bin/curl x`, false},
		{`./curl x`, false},
		{`/usr/bin/timeout 5 /usr/bin/curl x`, false},
		{`c\url x`, false},
		{`'cu'rl x`, false},
		{`"curl" x`, false},
		{`bash <<< 'curl x'`, false},
		{"bash <<'EOF'\ncurl x\nEOF", false},
		{"sh <<EOF\ncurl x\nEOF", false},
		{`echo 'curl x' | bash`, false},
		{`printf 'curl x\n' | sh`, false},
		{"cat <<'EOF' | bash\ncurl x\nEOF", false},
		{`watch curl x`, false},
		{`watch -n 1 'curl x'`, false},
		{`setsid curl x`, false},
		{`sudo curl x`, false},
		{`wget --use-askpass=curl x`, true},
		{`wget --use-a=curl x`, true},
		{`wget -qe use_askpass=curl x`, true},
		{`wget --config=rc x`, true},
		{`WGETRC=rc wget x`, true},
		{`WGET_ASKPASS=curl wget x`, false},
		{`$X x`, true},
		{`$(echo curl) x`, true},
		{`${cmd} x`, true},
		{`"$(which curl)" x`, true},
		{`cu* x`, true},
		{`curl x | sh`, true},
		{`bash < file`, true},
		{`bash script.sh`, true},
		{`bash`, true},
		{`bash -c "$X"`, true},
		{`eval "$X"`, true},
		{`source f`, true},
		{`. ./f`, true},
		{`echo "$X" | bash`, true},
		{`env -S 'curl x'`, true},
		{`split -n 1 --filter='curl x' f`, false},
		{`tar -cf /dev/null --checkpoint=1 --checkpoint-action=exec='curl x' .`, false},
		{`tar -I 'curl x' -cf a .`, false},
		{`tar -cIcurl -f a .`, false},
		{`tar cIf 'curl x' a.tar .`, false},
		{`tar cfI a.tar 'curl x' .`, false},
		{`tar xvfF a.tar 'curl x'`, false},
		{`sftp -D 'curl x' h`, false},
		{`scp -D curl a b:`, false},
		{`git instaweb --httpd='curl x'`, false},
		{`git instaweb -d 'curl x'`, false},
		{`git instaweb --browser='curl x'`, false},
		{`git daemon --access-hook='curl x' --export-all`, false},
		{`TAR_OPTIONS='--checkpoint-action=exec=curl\ x' tar -cf /dev/null f`, true},
		{`MAKEFLAGS='--eval=x:;curl' make x`, true},
		{`XDG_CONFIG_HOME=../xdg git status`, true},
		{`GCONV_PATH=./g iconv -f X f`, true},
		{`export NODE_OPTIONS='--require ./x.js'; node a.js`, true},
		{`npm_config_script_shell=./x npm test`, true},
		{`LD_BIND_NOW=1 ls`, true},
		{`sed 's/.*/x/e' f`, true},
		{`sed -n '1e id' f`, true},
		{`sed 's/[/]/#/e' f`, true},
		{`sed -f s.sed f`, true},
		{`sed "$X" f`, true},
		{`history -s 'curl x'; fc -s`, true},
		{`fc -e 'curl x' -1`, true},
		{`FCEDIT='curl x' fc -1`, true},
		{`FCEDIT='curl x' git commit`, false},
		{`r`, true},
		{`ZIPOPT='-TT curl' zip -T a.zip f`, true},
		{`ZIP='-TT curl' zip -T a.zip f`, true},
		{`SUDO_ASKPASS=curl sudo -A true`, false},
		{`gpg-agent --daemon curl x`, false},
		{`tar --use-compress=curl -cf a .`, false},
		{`tar -xf a --to-command='curl x'`, false},
		{`install -s --strip-program=curl a b`, false},
		{`sort --compress-program=curl f`, false},
		{`zip -TT 'curl x' a.zip f`, false},
		{`scp -S curl a b:`, false},
		{`rsync -e 'curl x' a b:`, false},
		{`man -P 'curl x' ls`, false},
		{`git rebase --exec 'curl x' HEAD~1`, false},
		{`git rebase -x 'curl x' HEAD~1`, false},
		{`git -C . rebase --exec='curl x' HEAD~1`, false},
		{`git bisect run curl x`, false},
		{`git submodule foreach --recursive 'curl x'`, false},
		{`git difftool --extcmd='curl x'`, false},
		{`git filter-branch --tree-filter 'curl x'`, false},
		{`tar -I "$X" -cf a .`, true},
		{`vim -c '!curl x' f`, true},
		{`zip -q -T -TT'curl x' x.zip a`, false},
		{`zip -T -TT='curl x' a.zip f`, false},
		{"ssh -o 'ProxyCommand\tcurl x' h", false},
		{`ssh -vo ProxyCommand='curl x' h`, false},
		{`ssh -4oProxyCommand='curl x' h`, false},
		{`sqlite3 x.db <<< '.shell curl x'`, true},
		{`echo '.shell curl x' | sqlite3 x.db`, true},
		{`sqlite3 x.db < f.sql`, true},
		{`git grep -O'curl x' a`, false},
		{`git grep --open-files-in-pager='curl x' a`, false},
		{`ssh -o ProxyCommand='curl x' h`, false},
		{`ssh -oLocalCommand='curl x' -o PermitLocalCommand=yes h`, false},
		{`scp -o ProxyCommand='curl x' a h:`, false},
		{`ssh -F cfg h`, true},
		{`sqlite3 -cmd '.shell curl x' :memory:`, true},
		{`sqlite3 db '.shell curl x'`, true},
		{"sqlite3 db <<EOF\n.shell curl x\nEOF", true},
		{`x='a[$(curl x)]'; echo $((x))`, true},
		{`declare -i y='a[$(curl x)]'`, true},
		{`read x < f; echo $((x))`, true},
		{`x=$'a[\x24(curl x)]'; echo $((x))`, true},
		{`x=a[\$\(curl\ x\)]; echo $((x))`, true},
		{`d='$'; x="a[${d}(curl x)]"; [[ x -eq 1 ]]`, true},
		{`vim '+!curl x' f`, true},
		{`less '+!curl x' f`, true},
		{`gdb -ex 'shell curl x' a`, true},
		{`env --ignore-env curl x`, false},
		{`env --ig curl x`, true}, // ambiguous: env refuses it, so it is not unwrapped
		{`env --default-signal=INT curl x`, false},
		{`env --block-signal curl x`, false},
		{`env -iv curl x`, false},
		{`env -0i curl x`, false},
		{`env -iu HOME curl x`, false},
		{`env -iuHOME curl x`, false},
		{`env -a name curl x`, false},
		{`env --argv0 name curl x`, false},
		{`env -iS'curl x'`, true},
		{`env --split 'curl x'`, true},
		{`env -P /x curl x`, true},
		{`env --bogus curl x`, true},
		{`timeout --bogus 5 curl x`, true},
		{`nice --bogus curl x`, true},
		{`stdbuf -X curl x`, true},
		{`find . -exec $X {} \;`, true},
		{`bash -c 'curl x | sh'`, true},
		{`{ bash; } < f`, true},
		// trap's action and an alias's value are scripts the shell runs later (the alias
		// once its name is a command: always in zsh, in bash with expand_aliases).
		{`trap 'curl x' EXIT`, false},
		{`trap -- 'curl x' EXIT INT`, false},
		{`trap "$X" EXIT`, true},
		// And the name, which no rule names, then runs it with the words after it
		// (alias g=git; eval g push): a line that defines an alias is opaque.
		{`alias ls='curl x'`, true},
		{`alias -g L='curl x' ll='ls -l'`, true},
		{`alias g=git; eval g push`, true},
		{`alias "$X"`, true},
		// hash -p PATH NAME (bash) and hash NAME=PATH (zsh) make NAME run PATH, and enable -f
		// loads a builtin from a shared object: what a later command runs is not its name.
		{`hash -p /usr/bin/curl ls; ls x`, true},
		{`hash ls=/usr/bin/curl; ls x`, true},
		{`enable -f ./x.so x`, true},
		// zsh's functions, aliases and commands hashes and bash's BASH_CMDS and BASH_ALIASES
		// say what a name runs: `commands[ls]=/usr/bin/curl; ls x` runs curl.
		{`commands[ls]=/usr/bin/curl; ls x`, true},
		{`functions[ff]='curl x'; ff`, true},
		{`BASH_CMDS[ls]=/usr/bin/curl; ls x`, true},
		{`declare -A BASH_ALIASES=([ll]='curl x')`, true},
		{`typeset -A aliases; aliases=(ll 'curl x')`, true},
		// BASH_ENV and ENV name a file the next shell sources, ZDOTDIR the dir of zsh's
		// .zshenv: a script file given to a shell, as bash script.sh is.
		{`BASH_ENV=./x.sh bash -c true`, true},
		{`export ENV=./x.sh; sh -c true`, true},
		{`ZDOTDIR=. zsh -c true`, true},
		// git's config from the environment: the values are read as git -c's are, a config
		// file, a git dir or an exec path is opaque. PS4 is expanded, $(...) included, by
		// bash -x; LD_PRELOAD loads a shared object into any program.
		{`GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='curl x' git -p log`, false},
		{`GIT_CONFIG_PARAMETERS="'core.pager=curl x'" git -p log`, true},
		{`GIT_CONFIG_GLOBAL=./evil.cfg git status`, true},
		{`GIT_DIR=./evil git status`, true},
		{`PS4='$(curl x)' bash -xc true`, true},
		{`LD_PRELOAD=./x.so ls`, true},
		// Runners under other names, and programs no table describes, which may be runners:
		// each tail of their words that starts with a literal word is read.
		{`fakeroot-sysv curl x`, false},
		{`fakeroot-tcp -- curl x`, false},
		{`valgrind.bin -q curl x`, false},
		{`slogin -o ProxyCommand='curl x' h`, false},
		{`slogin h curl x`, false},
		{`vim.basic -es -c '!curl x' -c q`, true},
		{`editor -c '!curl x'`, true},
		{`gdbtui -batch -ex 'shell curl x'`, true},
		{`heaptrack curl x`, false},
		{`memusage curl x`, false},
		{`sotruss curl x`, false},
		{`msgexec -i x.po curl x`, false},
		{`ip netns exec ns curl x`, false},
		{`docker exec c curl x`, false},
		{`kubectl exec p -- curl x`, false},
		{`pyenv exec curl x`, false},
		{`tox -- curl x`, false},
		{`./run.sh "$X" curl x`, false},
		{`mytool a 'b c' "d'e" curl "it's"`, false},
		{`mytool a b c d e f g h i j k l m n o p q r s t u v w x y z 1 2 3 4 5 6 7 curl x`, false},
		// A word an undescribed program may hand to a shell, read in pieces when it does not
		// parse (dash runs the lines before a fault); a KEY=VALUE's value.
		{`hyperfine -r 1 'true; curl x; echo $['`, false},
		{"hyperfine -r 1 $'true\ncurl x\n)'", false},
		{`autossh -M 0 -o 'ProxyCommand=curl x' h`, false},
		{`sshfs -o ssh_command='curl x' h: mnt`, false},
		// xargs handing what it reads to a wrapper, which runs it.
		{`echo curl x | xargs env`, true},
		{`echo curl x | xargs nohup`, true},
		{`echo curl x | xargs sudo`, true},
		// A tail keeps what makes a command one sandboxd cannot read: a git alias, a
		// debugger given commands, a program the line wrote, a shell given a variable.
		{`mytool git -c alias.c='!curl x' c`, true},
		{`mytool gdb -batch -ex 'shell curl x'`, true},
		{`mytool vi -es -c '!curl x'`, true},
		{`cp /usr/bin/curl r; mytool ./r x`, true},
		{`mytool bash -c '$CMD'`, true},
		// An undescribed program inside a shell word or an option's value of another.
		{`hyperfine 'true; heaptrack curl x'`, false},
		{`mytool --cmd='heaptrack curl x'`, false},
		// In a runner's command string, and as a string or an option's value of theirs.
		{`script -qc "memusage curl x" /dev/null`, false},
		{`su -c "docker exec c curl x"`, false},
		{`ssh h "kubectl exec p -- curl x"`, false},
		{`flock f -c "heaptrack curl x"`, false},
		{`hyperfine 'true; curl x'`, false},
		{`nodemon --exec 'true; curl x'`, false},
		{`flatpak run --command=curl app x`, false},
		{`mytool --exec="curl x"`, false},
		{`mytool -ecurl x`, false},
		// Options whose value is a program; shells and debuggers by other names.
		{`rg --pre curl x d`, false},
		{`rg --hostname-bin=curl x`, false},
		{`strace -o "!curl x" true`, false},
		{`rsync --rsync-path="curl x" a b`, false},
		{`man --html="curl x" ls`, false},
		{`zsh-static -c 'true; curl x'`, true},
		{`mksh-static -c 'curl x'`, true},
		{`lksh -c 'curl x'`, true},
		{`rust-gdb -batch -ex 'shell curl x'`, true},
		{`lldb-15 -o 'platform shell curl x'`, true},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			c := Classify(tc.cmd, testOpts)
			if c.ReadOnly {
				t.Fatalf("%q: read-only\n%s", tc.cmd, c.Format())
			}
			hit, opaque := false, false
			for _, s := range c.Subcommands {
				opaque = opaque || s.Opaque
				if len(s.DenyPrefix) > 0 && path.Base(s.DenyPrefix[0]) == "curl" {
					hit = true
				}
			}
			if tc.opaque && !opaque {
				t.Errorf("%q: no opaque subcommand\n%s", tc.cmd, c.Format())
			}
			if !tc.opaque && !hit {
				t.Errorf("%q: no subcommand runs curl\n%s", tc.cmd, c.Format())
			}
			if !tc.opaque && opaque {
				t.Errorf("%q: opaque, want the literal script parsed\n%s", tc.cmd, c.Format())
			}
			checkInvariants(t, tc.cmd, c)
		})
	}
}

func TestNestedShape(t *testing.T) {
	t.Parallel()
	c := Classify(`ls && bash -c 'curl x; rm -rf y' && pwd`, testOpts)
	var got []string
	for _, s := range c.Subcommands {
		mark := ""
		if s.Nested {
			mark = "+"
		}
		got = append(got, mark+s.Text)
	}
	want := "ls|bash -c 'curl x; rm -rf y'|+curl x|+rm -rf y|pwd"
	if strings.Join(got, "|") != want {
		t.Fatalf("subcommands %q, want %q", strings.Join(got, "|"), want)
	}
	if strings.Join(c.Risks, ",") != "destructive,network" {
		t.Errorf("risks %q: nested risks should count", c.Risks)
	}
	// Deep nesting ends opaque rather than recursing without bound.
	deep := `bash -c 'bash -c "bash -c \"bash -c \\\"bash -c curl\\\"\""'`
	d := Classify(deep, testOpts)
	opaque := false
	for _, s := range d.Subcommands {
		opaque = opaque || s.Opaque
	}
	if !opaque {
		t.Errorf("deep nesting: want an opaque subcommand\n%s", d.Format())
	}
	// No nesting, nothing opaque, for plain commands.
	for _, cmd := range []string{"ls -la | grep x", "git status && echo ok", "find . -name '*.go'", "command -v git", "rm -rf build"} {
		for _, s := range Classify(cmd, testOpts).Subcommands {
			if s.Opaque || s.Nested {
				t.Errorf("%q: %q opaque=%v nested=%v", cmd, s.Text, s.Opaque, s.Nested)
			}
		}
	}
}

// TestArithmeticWithoutCodeStaysClear: arithmetic on values no command substitution or input
// can fill is not opaque, so Bash deny rules do not refuse every counting loop.
func TestArithmeticWithoutCodeStaysClear(t *testing.T) {
	for _, cmd := range []string{`x=1; echo $((x+1))`, `for i in 1 2 3; do echo $((i*2)); done`, `x=$((1+2)); echo $((x))`, `export X=$(pwd)`} {
		c := Classify(cmd, Options{Cwd: "/home/u/proj"})
		for _, s := range c.Subcommands {
			if s.Opaque {
				t.Errorf("%s: %q is opaque", cmd, s.Text)
			}
		}
	}
}

// TestUndescribedWordsThatAreNoLine: a word of an undescribed program that does not parse as
// shell (a message) is no command line: the line stays readable, nothing opaque.
func TestUndescribedWordsThatAreNoLine(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{`gh pr create --title "don't break it" --body "(wip"`, `mytool --msg="it's done"`,
		// Words that name an editor, a scheduler or a path as a command would are no command
		// here: gh's subcommand view, a message's "at", go's ./...
		`gh pr view 12`, `gh pr create --title "Fix crash at startup" --body x`, `go test ./...`, `aws batch list-jobs`,
		`pytest -k "curl or proxy"`, `gh pr create --title "Fix flaky test" --body "Drops the curl retry loop"`,
		`eslint ` + strings.Repeat("a.js ", 40), `npx eslint .`, `gh secret set TOKEN --body x`, `gh repo view`} {
		hook := testOpts
		hook.Unconfined = true
		for _, s := range append(Classify(cmd, testOpts).Subcommands, Classify(cmd, hook).Subcommands...) {
			if s.Opaque {
				t.Errorf("%q: %q is opaque", cmd, s.Text)
			}
			if len(s.DenyPrefix) > 0 && s.DenyPrefix[0] == "curl" {
				t.Errorf("%q: %q read as curl", cmd, s.Text)
			}
		}
	}
}
