package classifier

import (
	"testing"
)

// TestEvalFamilies covers the families of issue #16 where bash runs code or writes from
// text that looks like data: each case must not be read-only, and the read-only spellings
// beside them must stay read-only.
func TestEvalFamilies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		family   string
		cmd      string
		readOnly bool
		reason   string // optional
	}{
		// Variable names with subscripts, in every builtin that takes one.
		{"names", `printf -v 'a[$(id>pwn)]' %s 1`, false, reasonVarName},
		{"names", `printf -v'a[$(id)]' %s 1`, false, reasonVarName},
		{"names", `printf -v "$n" %s 1`, false, reasonVarName},
		{"names", `printf "$fmt" x`, false, "dynamic_argument"},
		{"names", `read 'a[$(id)]' < /dev/null`, false, reasonVarName},
		{"names", `read -r -a 'a[$(id)]' < /dev/null`, false, reasonVarName},
		{"names", `read -p x 'a[1]'`, false, reasonVarName},
		{"names", `readarray 'a[$(id)]' < /dev/null`, false, reasonVarName},
		{"names", `mapfile -t "a[\$(id)]" < f`, false, reasonVarName},
		{"names", `mapfile -C 'id #' -c 1 x < f`, false, "executes_code"},
		{"names", `readarray -C id x < f`, false, "executes_code"},
		{"names", `getopts ab 'o[$(id)]'`, false, reasonVarName},
		{"names", `test -v 'a[$(id)]'`, false, reasonVarName},
		{"names", `[ -v 'a[$(id)]' ]`, false, reasonVarName},
		{"names", `[ -R 'a[$(id)]' ]`, false, reasonVarName},
		{"names", `[ $o 'a[$(id)]' ]`, false, reasonVarName},
		{"names", `[[ -v 'a[$(id)]' ]]`, false, reasonVarName},
		{"names", `[[ -v $x ]]`, false, reasonVarName},
		{"names", `printf * x`, false, "glob_argument"},
		{"names", `printf '%s\n' x`, true, ""},
		{"names", `printf -v x %s 1`, true, ""},
		{"names", `read -r line < f`, true, ""},
		{"names", `mapfile -t lines < f`, true, ""},
		{"names", `test -v HOME`, true, ""},
		{"names", `[ -v HOME ]`, true, ""},
		{"names", `[[ -v x ]]`, true, ""},
		{"names", `[ -f go.mod ]`, true, ""},
		// Exported variables set by something other than a plain assignment: each is
		// exported to the commands after it, so PATH or HOME picks the code they run.
		{"assigned", `printf -v HOME %s cfg; git status`, false, reasonUnsafeAssign},
		{"assigned", `printf -vPATH %s bin; ls`, false, reasonUnsafeAssign},
		{"assigned", `read HOME < f; git status`, false, reasonUnsafeAssign},
		{"assigned", `read -r x PATH < f; ls`, false, reasonUnsafeAssign},
		{"assigned", `read -rd '' HOME < f; git status`, false, reasonUnsafeAssign},
		{"assigned", `read -a PATH < f; ls`, false, reasonUnsafeAssign},
		{"assigned", `read -aPATH < f; ls`, false, reasonUnsafeAssign},
		{"assigned", `mapfile -t HOME < f; git status`, false, reasonUnsafeAssign},
		{"assigned", `readarray -tO 0 PATH < f; ls`, false, reasonUnsafeAssign},
		{"assigned", `getopts a HOME; git status`, false, reasonUnsafeAssign},
		{"assigned", `for PATH in tools; do ls; done`, false, reasonUnsafeAssign},
		{"assigned", `select HOME in cfg; do git status; done`, false, reasonUnsafeAssign},
		{"assigned", `echo ${BASH_ENV:=x} ${HOME=cfg}; git status`, false, reasonUnsafeAssign},
		{"assigned", `: {PATH}<f; ls`, false, reasonUnsafeAssign},
		{"assigned", `ls {HOME}<f; git status`, false, reasonUnsafeAssign},
		{"assigned", `read x y < f; mapfile -t z < f; getopts ab o; printf -v w %s 1`, true, ""},
		{"assigned", `for f in *.go; do wc -l "$f"; done`, true, ""},
		{"assigned", `echo ${z:=1} ${NO_COLOR:=1}`, true, ""},
		{"assigned", `echo ${LANG:=zh_TW}; ls`, false, reasonUnsafeAssign},
		// Expansions that evaluate a value as code.
		{"indirect", `echo ${!x}`, false, reasonIndirect},
		{"indirect", `echo "${!x}"`, false, reasonIndirect},
		{"indirect", `echo ${!a[@]} ${!BASH*}`, true, ""},
		{"prompt", `echo "${x@P}"`, false, reasonPrompt},
		{"prompt", `echo ${x@Q} ${x@U}`, true, ""},
		// Arithmetic on text.
		{"arith", `[[ 'a[$(id)]' -eq 0 ]]`, false, reasonArith},
		{"arith", `[[ "a[1]" -lt 2 ]]`, false, reasonArith},
		{"arith", `echo 'a[$(id)]'; (( $_ ))`, false, reasonArith},
		{"arith", `echo 'a[$(id)]'; ((_))`, false, reasonArith},
		{"arith", `[[ x =~ (.*) ]]; (( BASH_REMATCH[1] ))`, false, reasonArith},
		{"arith", `echo $(( "a[1]" ))`, false, reasonArith},
		{"arith", `echo $(( $(echo 1) ))`, false, reasonArith},
		{"arith", `echo ${a['k']}`, false, reasonArith},
		{"arith", `echo ${a["$k"]}`, false, reasonArith},
		{"arith", `echo ${x:'1':1}`, false, reasonArith},
		{"arith", `x='a[$(id)]'; echo $((x))`, false, "arithmetic_eval"},
		{"arith", `(( x = 1 )); echo $((y))`, false, "arithmetic_eval"},
		{"arith", `let 'a[$(id)]'`, false, ""},
		{"arith", `echo $((1 + 2)) ${a[0]} ${a[i]} ${#x}`, true, ""},
		{"arith", `[[ $x -eq 1 ]]`, true, ""},
		{"arith", `(( x + 1 ))`, true, ""},
		{"quotes", `echo "${x:-'$(id)'}"`, false, reasonQuoteInExp},
		{"quotes", `echo "${x/'a'/b}"`, false, reasonQuoteInExp},
		{"quotes", "cat <<EOF\n${x:-'$(id)'}\nEOF", false, reasonQuoteInExp},
		{"quotes", `echo "${x:-default}" ${x:-'lit'}`, true, ""},
		{"array assignment", `a['$(id)']=1`, false, reasonArrayAssign},
		{"array assignment", `a=([1]=x)`, false, reasonArrayAssign},
		{"array assignment", `a[0]=1 ls`, false, ""},
		// Brace expansion assembled from quoted parts.
		{"brace", `sort {"-o",out} f`, false, "glob_argument"},
		{"brace", `printf {"-v",'a[$(id)]'} %s 1`, false, "glob_argument"},
		{"brace", `git log {"--output=x",}`, false, "glob_argument"},
		{"brace", `find . {'-delete',}`, false, "glob_argument"},
		{"brace", `{ls,-la}`, false, "dynamic_command"},
		{"brace", `ls {a,b} "{x,y}"`, true, ""},
		{"brace", `git show HEAD@{1}`, true, ""},
		// Functions shadow commands and paths.
		{"functions", `/bin/ls() { id; }; /bin/ls`, false, reasonFuncDef},
		{"functions", `command_not_found_handle() { id; }; nosuchcmd`, false, ""},
		{"functions", `f() { :; }`, false, reasonFuncDef},
		// Line structure bash reads differently.
		{"lines", "ls # x\\\nid", false, reasonLineStruct},
		{"lines", "cat <<E\\\nOF\nx\nEOF\n", false, ""},
		{"lines", "ls \\\n  -la", true, ""},
		// sed commands after labels, braces and separators.
		{"sed", `sed -n ':x w out' f`, false, "sed_write"},
		{"sed", `sed ':a;w out' f`, false, "sed_write"},
		{"sed", `sed 'b x; w out' f`, false, "sed_write"},
		{"sed", `sed -n -e '/a/{:b w o' -e '}' f`, false, "sed_write"},
		{"sed", `sed '$!{N};s/a/b/w out' f`, false, "sed_write"},
		{"sed", `sed -n ':x e id' f`, false, "sed_exec"},
		{"sed", `sed ':x R /etc/passwd' f`, false, "sed_read_file"},
		{"sed", `sed -n '1e id' f`, false, "sed_exec"},
		{"sed", `sed -n ':a;N;$!ba;p' f`, true, ""},
		// A delimiter inside a bracket expression does not end the regex.
		{"sed", `sed 's/[/]/#/e' f`, false, "sed_exec"},
		{"sed", `sed 's/[/]/#/w out' f`, false, "sed_write"},
		{"sed", `sed 's/[]/]/#/e' f`, false, "sed_exec"},
		{"sed", `sed 's/[^]/]/#/e' f`, false, "sed_exec"},
		{"sed", `sed 's/[[:alpha:]/]/#/e' f`, false, "sed_exec"},
		{"sed", `sed 's|[|]|#|e' f`, false, "sed_exec"},
		{"sed", `sed '/[/]/e id' f`, false, "sed_exec"},
		{"sed", `sed '\,[,],e id' f`, false, "sed_exec"},
		{"sed", `sed 's/[\/]/x/' f`, false, "sed_unparsed"},
		{"sed", `sed 's/[a/x/' f`, false, "sed_unparsed"},
		{"sed", `sed 's/[a-z]*/X/g' f`, true, ""},
		{"sed", `sed -n '/^[0-9][[:space:]]/p' f`, true, ""},
		{"sed", `sed 'y/[/]/' f`, true, ""},
		// In-place editing is reported only when it is sed's one problem.
		{"sed", `sed -i 's/a/b/' f`, false, "sed_in_place"},
		{"sed", `sed -i '1e id' f`, false, "sed_exec"},
		{"sed", `sed -i -e 's/a/b/e' f`, false, "sed_exec"},
		{"sed", `sed --in-place=.bak '1r /etc/shadow' f`, false, "sed_read_file"},
		{"sed", `sed -i 's/a/b/w /etc/x' f`, false, "sed_write"},
		{"sed", `sed -i -f s.sed f`, false, "sed_script_file"},
		{"sed", `sed -i --nosuchflag 's/a/b/' f`, false, "unsafe_flag"},
		// git writing a file, other repositories, config writes.
		{"git", `git rev-list --output=x HEAD`, false, "git_output"},
		{"git", `git shortlog --output=x HEAD`, false, "git_output"},
		{"git", `git blame --output=x f`, false, "git_output"},
		{"git", `git reflog --output=x`, false, "git_output"},
		{"git", `git stash list --output=x`, false, "git_output"},
		{"git", `git log --out=x`, false, "git_output"},
		{"git", `git diff --output x`, false, "git_output"},
		{"git", `git show --output=x HEAD`, false, "git_output"},
		{"git", `git format-patch -o d HEAD~1`, false, "git_write_subcommand"},
		{"git", `git config core.pager x --get`, false, "git_config_write"},
		{"git", `git config a.b v`, false, "git_config_write"},
		{"git", `git config --unset a.b`, false, "git_config_write"},
		{"git", `git config set a.b v`, false, "git_config_write"},
		{"git", `git -C sub status`, false, "git_other_repo"},
		{"git", `git --git-dir=.git log`, false, "git_other_repo"},
		{"git", `git --work-tree=. status`, false, "git_other_repo"},
		{"git", `git -c core.fsmonitor=x status`, false, "git_config_override"},
		{"git", `git config --get user.name`, true, ""},
		{"git", `git config user.name`, true, ""},
		{"git", `git config --list`, true, ""},
		{"git", `git config get user.name`, true, ""},
		{"git", `git log --oneline --output-indicator-new=+ -3`, true, ""},
		// Redirections of compound commands with no simple command in them.
		{"compound redirect", `case x in esac > out`, false, "write_redirect"},
		{"compound redirect", `case x in y) ;; esac > out`, false, "write_redirect"},
		{"compound redirect", `case x in esac > /dev/null`, true, ""},
		// nohup writes nohup.out.
		{"nohup", `nohup ls`, false, "nohup_output"},
		{"nohup", `nohup rm x`, false, "unknown_command"},
	} {
		t.Run(tc.family+"/"+tc.cmd, func(t *testing.T) {
			t.Parallel()
			c := Classify(tc.cmd, testOpts)
			if c.ReadOnly != tc.readOnly {
				t.Fatalf("%q: read_only=%v (%s), want %v\n%s", tc.cmd, c.ReadOnly, c.Reason, tc.readOnly, c.Format())
			}
			if tc.reason != "" && c.Reason != tc.reason {
				t.Errorf("%q: reason %s, want %s\n%s", tc.cmd, c.Reason, tc.reason, c.Format())
			}
			checkInvariants(t, tc.cmd, c)
		})
	}
}
