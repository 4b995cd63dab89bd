package classifier

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestPaths: the path facts of recognised commands, redirections and cd, made absolute
// against Options (Cwd /home/u/proj, Home /home/u), written "access:path:cmd".
func TestPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		want       string // space-separated, in order
		incomplete bool
	}{
		{"ls", "", false},
		{"cat .env", "read:/home/u/proj/.env:cat", false},
		{"head -n 5 a ../b /etc/c", "read:/home/u/proj/a:head read:/home/u/b:head read:/etc/c:head", false},
		{"grep -rn x src", "read:/home/u/proj/src:grep", false},
		{"grep -e x -e y f", "read:/home/u/proj/f:grep", false},
		{"grep -f pats f", "read:/home/u/proj/pats:grep read:/home/u/proj/f:grep", false},
		{"grep -r secret", "read:/home/u/proj:grep", false},
		{"rg -n TODO", "read:/home/u/proj:rg", false},
		{"find . -name x", "read:/home/u/proj:find", false},
		{"sed -n 1p f", "read:/home/u/proj/f:sed", false},
		{"sed -i 's/a/b/' f", "write:/home/u/proj/f:sed", false},
		{"sed -n 'w /home/u/.bashrc' f", "read:/home/u/proj/f:sed", true},
		{"sed 'r ../other/id.key' f", "read:/home/u/proj/f:sed", true},
		{"sed 's/a/b/w out' f", "read:/home/u/proj/f:sed", true},
		{"sed -f script.sed f", "read:/home/u/proj/script.sed:sed read:/home/u/proj/f:sed", true},
		// Its backups are written too: FILE+suffix, or the suffix with each * the file's name.
		{"sed -i.json 's/a/b/' .mcp", "write:/home/u/proj/.mcp.json:sed write:/home/u/proj/.mcp:sed", false},
		{"sed -Ei.bak -e 's/a/b/' x y", "write:/home/u/proj/x.bak:sed write:/home/u/proj/y.bak:sed write:/home/u/proj/x:sed write:/home/u/proj/y:sed", false},
		{"sed --in-place=.envrc s/a/b/ ''", "write:/home/u/proj/.envrc:sed", false},
		{"sed -i'.git/hooks/*' s/a/b/ pre-commit", "write:/home/u/proj/.git/hooks/pre-commit:sed write:/home/u/proj/pre-commit:sed", false},
		{"sed -i'*' s/a/b/ f", "write:/home/u/proj/f:sed", false},
		{`sed -i.bak s/a/b/ "$F"`, "", true},
		{"sed --follow-symlinks -i.json s/a/b/ link", "write:/home/u/proj/link.json:sed write:/home/u/proj/link:sed", true},
		// cp, mv, install and ln's backups are named by a suffix the line may not show.
		{"cp -b -S .json x .mcp", "write:/home/u/proj/.mcp:cp write:/home/u/proj/.mcp/x:cp read:/home/u/proj/x:cp", true},
		{"mv --suffix=rc y .env", "write:/home/u/proj/.env/y:mv write:/home/u/proj/.env:mv write:/home/u/proj/y:mv read:/home/u/proj/y:mv", true},
		{"ln -sfb x .mcp", "write:/home/u/proj/.mcp:ln write:/home/u/proj/.mcp/x:ln", true},
		// A glob in an option's value is expanded by the shell too.
		{"cp -t .claud? settings.json", "read:/home/u/proj/settings.json:cp", true},
		{"sort -o .envr? x", "read:/home/u/proj/x:sort", true},
		{"cp 'x.claud?' -t .claud?", "read:/home/u/proj/x.claud?:cp", true},
		{"cp -t .claud? 'x.claud?'", "read:/home/u/proj/x.claud?:cp", true},
		{"cp -t dir a", "write:/home/u/proj/dir:cp write:/home/u/proj/dir/a:cp read:/home/u/proj/a:cp", false},
		{"cp a b dir", "write:/home/u/proj/dir:cp write:/home/u/proj/dir/a:cp write:/home/u/proj/dir/b:cp read:/home/u/proj/a:cp read:/home/u/proj/b:cp", false},
		{"cp evil.cfg .git/config", "write:/home/u/proj/.git/config:cp write:/home/u/proj/.git/config/evil.cfg:cp read:/home/u/proj/evil.cfg:cp", false},
		{"mv a b", "write:/home/u/proj/b/a:mv write:/home/u/proj/b:mv write:/home/u/proj/a:mv read:/home/u/proj/a:mv", false},
		// An option whose value is optional takes none unless given with =: the next word is
		// a file.
		{"cp --preserve a b", "write:/home/u/proj/b:cp write:/home/u/proj/b/a:cp read:/home/u/proj/a:cp", false},
		{"mkdir -Z a", "write:/home/u/proj/a:mkdir", false},
		{"install -C a b", "write:/home/u/proj/b:install write:/home/u/proj/b/a:install read:/home/u/proj/a:install", false},
		{"rm -rf build ~/x", "write:/home/u/proj/build:rm write:/home/u/x:rm", false},
		{"mkdir -p -m 755 a/b", "write:/home/u/proj/a/b:mkdir", false},
		{"touch x", "write:/home/u/proj/x:touch", false},
		{"chmod 600 k", "write:/home/u/proj/k:chmod", false},
		{"chmod -w k", "write:/home/u/proj/k:chmod", false},
		{"chmod -R -x,u+w k", "write:/home/u/proj/k:chmod", false},
		{"chmod -R 600 k", "write:/home/u/proj/k:chmod", false},
		{"chown --reference=r f", "write:/home/u/proj/f:chown", false},
		{"tee -a log", "write:/home/u/proj/log:tee", false},
		{"dd if=/dev/zero of=img", "read:/dev/zero:dd write:/home/u/proj/img:dd", false},
		{"python3 tool.py x", "read:/home/u/proj/tool.py:python3", false},
		{"python3 -c 'print(1)'", "", false},
		{"bash run.sh", "read:/home/u/proj/run.sh:bash", false},
		{"ln -s target link", "write:/home/u/proj/link:ln write:/home/u/proj/link/target:ln", false},
		{"sort -o out in", "write:/home/u/proj/out:sort read:/home/u/proj/in:sort", false},
		{"uniq in out", "read:/home/u/proj/in:uniq write:/home/u/proj/out:uniq", false},
		{"curl -o f http://x", "write:/home/u/proj/f:curl", false},
		// curl's and wget's own files: bodies, headers and formats from @FILE, form files,
		// cookies, traces, certificates; a config names what the line does not; a name
		// made up from the URL is written in the cwd, unnamed.
		{"curl -d @../o/.env http://x", "read:/home/u/o/.env:curl", false},
		{"curl http://x --data-binary @k -H @h -w @w", "read:/home/u/proj/k:curl read:/home/u/proj/h:curl read:/home/u/proj/w:curl", false},
		{"curl -d @- -d x@y --data-raw @z http://x", "", false},
		{"curl --data-urlencode n@k --data-urlencode a=b@c --url-query @q http://x", "read:/home/u/proj/k:curl read:/home/u/proj/q:curl", false},
		{"curl -F a=@k -F 'b=<t;type=text/plain' -F c=d http://x", "read:/home/u/proj/k:curl read:/home/u/proj/t:curl", false},
		{"curl -F 'a=@\"k\"' http://x", "", true},
		{"curl -F 'a=@k,l' http://x", "", true},
		{"curl -F 'a=b;headers=@h' http://x", "", true},
		{"curl -b jar -b a=b -c out -D hdr --trace tr http://x", "read:/home/u/proj/jar:curl write:/home/u/proj/out:curl write:/home/u/proj/hdr:curl write:/home/u/proj/tr:curl", false},
		{"curl --cert c --key k --cacert ca --netrc-file n http://x", "read:/home/u/proj/c:curl read:/home/u/proj/k:curl read:/home/u/proj/ca:curl read:/home/u/proj/n:curl", false},
		{"curl -K cfg http://x", "read:/home/u/proj/cfg:curl", true},
		{"curl -T '{a,b}' http://x", "", true},
		{"curl -O http://x/.bashrc", "", true},
		{"curl -o '#1' 'http://x/{a,b}'", "", true},
		{"wget http://x/y", "", true},
		// A file: URL is a read of its path; one curl decodes or expands is not known.
		{"curl -s file:///etc/x File:/a http://x --url file://localhost/b", "read:/etc/x:curl read:/a:curl read:/b:curl", false},
		{"curl --proto-default file /c localhost/d http://x", "read:/c:curl read:/d:curl", false},
		{"curl file:///a/%2eenv", "", true},
		{"CURL_HOME=. curl http://x", "", true},
		{"export XDG_CONFIG_HOME=/tmp; curl http://x", "", true},
		{"wget -O- -i urls --post-file body --load-cookies c --save-cookies s -o log http://x", "read:/home/u/proj/urls:wget read:/home/u/proj/body:wget read:/home/u/proj/c:wget write:/home/u/proj/s:wget write:/home/u/proj/log:wget", false},
		{"wget -qO out http://x", "write:/home/u/proj/out:wget", false},
		{"timeout 5 cat f", "read:/home/u/proj/f:cat", false},
		{"env -C /home/u/secret cat f", "read:/home/u/proj/f:cat", true},
		{"env --chdir=/home/u/secret cat f", "read:/home/u/proj/f:cat", true},
		{"env -iC../secret cat f", "read:/home/u/proj/f:cat", true},
		{"env -i --ch=../secret cat f", "read:/home/u/proj/f:cat", true},
		{"env -i LC_ALL=C cat f", "read:/home/u/proj/f:cat", false},
		{"echo x > out 2>/dev/null", "write:/home/u/proj/out:redirect", false},
		{"echo x >> ~/.bashrc", "write:/home/u/.bashrc:redirect", false},
		{"wc -l < in", "read:/home/u/proj/in:redirect", false},
		{"cat {fd}</home/u/secret/f <&10", "read:/home/u/secret/f:redirect", false},
		{"exec {fd}<../secret/f; cat <&$fd", "read:/home/u/secret/f:redirect", false},
		{"cat 3</home/u/secret/f <&3", "read:/home/u/secret/f:redirect", false},
		{"{ ls; pwd; } > o", "write:/home/u/proj/o:redirect", false},
		// After cd DIR &&, the next command is in DIR: it runs only when the cd succeeded.
		{"cd sub && cat x", "read:/home/u/proj/sub:cd read:/home/u/proj/sub/x:cat", false},
		{"cd sub; cat x", "read:/home/u/proj/sub:cd read:/home/u/proj/sub/x:cat read:/home/u/proj/x:cat", false},
		{"cd sub && true; cat x", "read:/home/u/proj/sub:cd read:/home/u/proj/x:cat read:/home/u/proj/sub/x:cat", false},
		{"cd sub && cd a && false || cat x", "read:/home/u/proj/sub:cd read:/home/u/proj/sub/a:cd read:/home/u/proj/a:cd read:/home/u/proj/x:cat read:/home/u/proj/sub/x:cat read:/home/u/proj/sub/a/x:cat read:/home/u/proj/a/x:cat", false},
		{"! cd sub && cat x", "read:/home/u/proj/sub:cd read:/home/u/proj/sub/x:cat read:/home/u/proj/x:cat", false},
		{"cd /etc; cat passwd", "read:/etc:cd read:/etc/passwd:cat read:/home/u/proj/passwd:cat", false},
		{"cd; cat .bashrc", "read:/home/u:cd read:/home/u/.bashrc:cat read:/home/u/proj/.bashrc:cat", false},
		{"(cd /etc); cat x", "read:/etc:cd read:/home/u/proj/x:cat", false},
		{"cd $D; cat z", "read:/home/u/proj/z:cat", true},
		{"cat $F", "", true},
		{"cat *.go", "", true},
		{"cat secre[\"t\"]/f", "", true},
		{"echo x > $F", "", true},
		{"touch ~other/x", "", true},
		{"bash -c 'cat /etc/shadow'", "read:/etc/shadow:cat", false},
		{"git status", "", false},
		{"git log --oneline -5", "", false},
		{"git show HEAD:secrets/k", "read:/home/u/proj/secrets/k:git read:/home/u/secrets/k:git:alt read:/home/secrets/k:git:alt read:/secrets/k:git:alt", false},
		{"git --no-pager show main~2:./.env", "read:/home/u/proj/.env:git", false},
		{"git cat-file -p :0:.env", "read:/home/u/proj/.env:git read:/home/u/.env:git:alt read:/home/.env:git:alt read:/.env:git:alt", false},
		// A diff's order file, and the file find compares with, are read.
		{"git diff -O../o/f", "read:/home/u/o/f:git", false},
		{"find . -anewer /o/f -newermt 2020-01-01 -samefile x", "read:/home/u/proj:find read:/o/f:find read:/home/u/proj/x:find", false},
		// A short option in a cluster takes the rest, or the next word.
		{"git config -lf s/f", "read:/home/u/proj/s/f:git", false},
		{"git config -lzfs/f", "read:/home/u/proj/s/f:git", false},
		{"git config --blob=HEAD:s/f -l", "read:/home/u/proj/s/f:git read:/home/u/s/f:git:alt read:/home/s/f:git:alt read:/s/f:git:alt", false},
		{"git cat-file blob :.env", "read:/home/u/proj/blob:git read:/home/u/proj/.env:git read:/home/u/.env:git:alt read:/home/.env:git:alt read:/.env:git:alt", false},
		{"git log -p -- secrets", "read:/home/u/proj/secrets:git", false},
		{"git log -L 1,5:.env", "read:/home/u/proj/.env:git read:/home/u/.env:git:alt read:/home/.env:git:alt read:/.env:git:alt", false},
		{"git log -L1,5:.env", "read:/home/u/proj/.env:git", false},
		{"git diff HEAD~1 .env", "read:/home/u/proj/HEAD~1:git read:/home/u/proj/.env:git", false},
		{"git grep SECRET HEAD -- .env", "read:/home/u/proj/HEAD:git read:/home/u/proj/.env:git", false},
		{"git grep -e SECRET HEAD:.env", "read:/home/u/proj/.env:git read:/home/u/.env:git:alt read:/home/.env:git:alt read:/.env:git:alt", false},
		{"git blame -- .env", "read:/home/u/proj/.env:git", false},
		{"git stash show -p", "read:/home/u/proj/show:git", false},
		{"timeout 5 git show HEAD:.env", "read:/home/u/proj/.env:git read:/home/u/.env:git:alt read:/home/.env:git:alt read:/.env:git:alt", false},
		// From a session in a repository's subdir, HEAD:PATH is PATH at the top, wherever that is.
		{"cd sub && git show HEAD:.env", "read:/home/u/proj/sub:cd read:/home/u/proj/sub/.env:git read:/home/u/proj/.env:git:alt read:/home/u/.env:git:alt read:/home/.env:git:alt read:/.env:git:alt", false},
		{"git -C /elsewhere show HEAD:.env", "", true},
		{"git show $REV:.env", "", true},
		{"cd sub; bash -c 'cat x'", "read:/home/u/proj/sub:cd read:/home/u/proj/x:cat", true},
		{"git status", "", false},
		{"npm test", "", false},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			t.Parallel()
			c := Classify(tc.cmd, testOpts)
			var got []string
			for _, p := range c.Paths {
				if p.Alternative {
					p.Cmd += ":alt"
				}
				got = append(got, p.Access+":"+p.Path+":"+p.Cmd)
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("%q: paths\n  %s\nwant\n  %s", tc.cmd, g, tc.want)
			}
			if c.PathsIncomplete != tc.incomplete {
				t.Errorf("%q: paths_incomplete=%v, want %v", tc.cmd, c.PathsIncomplete, tc.incomplete)
			}
		})
	}
}

// TestPathsRaw: a path cleaning changes keeps its form as the program gets it, made absolute
// (Raw): the kernel takes a `..` after a symlink from where the link leads, so for a command
// run outside any sandbox the cleaned path is not always the file opened.
func TestPathsRaw(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]string{
		"cat link/../secret/f":            "/home/u/proj/secret/f</home/u/proj/link/../secret/f",
		"cat /tmp/l/../x":                 "/tmp/x</tmp/l/../x",
		"cd /tmp/l && cat ../s":           "/tmp/l<,/tmp/s</tmp/l/../s",
		"cat plain ./dot ~/h//x":          "/home/u/h/x</home/u/h//x,/home/u/proj/dot</home/u/proj/./dot,/home/u/proj/plain<",
		"cat /etc/passwd < /etc/../etc/x": "/etc/passwd<,/etc/x</etc/../etc/x",
	} {
		c := Classify(cmd, testOpts)
		var got []string
		for _, p := range c.Paths {
			got = append(got, p.Path+"<"+p.Raw)
		}
		slices.Sort(got)
		if g := strings.Join(got, ","); g != want {
			t.Errorf("%q: paths %s, want %s", cmd, g, want)
		}
	}
}

// TestPathsGlobs: a bounded glob is kept as the patterns the daemon expands (Globs), one per
// brace alternative and directory it is taken against; an unbounded one leaves none.
func TestPathsGlobs(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]string{
		"cat */secret":                    "/home/u/proj/*/secret",
		"cat up/sec* *.go":                "/home/u/proj/*.go,/home/u/proj/up/sec*",
		"cat {a,b}*/x":                    "/home/u/proj/a*/x,/home/u/proj/b*/x",
		"shopt -s extglob; cat @(up|x)/s": "/home/u/proj/@(up|x)/s",
		"bash -c 'head u?/*'":             "/home/u/proj/u?/*",
		"cd sub && cat *":                 "/home/u/proj/sub/*",
		"echo *":                          "",
		"cat $d/*":                        "",
		// A glob where an option's value or a pattern goes gives operands too.
		"grep -v -e sub/* f": "/home/u/proj/sub/*",
		"head -n * f":        "/home/u/proj/*",
	} {
		c := Classify(cmd, testOpts)
		got := slices.Clone(c.Globs)
		slices.Sort(got)
		if g := strings.Join(got, ","); g != want {
			t.Errorf("%q: globs %s, want %s", cmd, g, want)
		}
		if want != "" && (!c.PathsIncomplete || c.PathsUnbounded) {
			t.Errorf("%q: incomplete %v unbounded %v, want bounded", cmd, c.PathsIncomplete, c.PathsUnbounded)
		}
	}
	for _, cmd := range []string{"head -n {1,/etc/x} f", "grep -v {x,/etc/x} f", "grep -e /etc/* f", "jq --arg x {a,~/.ssh/id_rsa}"} {
		if c := Classify(cmd, testOpts); !c.PathsUnbounded {
			t.Errorf("%q: a brace or glob option value naming paths outside is not unbounded", cmd)
		}
	}
	var many []string
	for i := range maxGlobs + 1 {
		many = append(many, fmt.Sprintf("d%d/*", i))
	}
	if c := Classify("cat "+strings.Join(many, " "), testOpts); !c.PathsUnbounded || len(c.Globs) > maxGlobs {
		t.Errorf("%d globs: unbounded %v with %d kept", len(many), c.PathsUnbounded, len(c.Globs))
	}
}

// TestPathsNoCwd: without a cwd relative paths are not made up; the list says so.
func TestPathsNoCwd(t *testing.T) {
	t.Parallel()
	c := Classify("cat a /etc/b", Options{})
	if len(c.Paths) != 1 || c.Paths[0].Path != "/etc/b" || !c.PathsIncomplete {
		t.Fatalf("paths %+v incomplete %v", c.Paths, c.PathsIncomplete)
	}
}

// noFileOperands are the read-only commands whose operands and options name no file whose
// content they read: they print, test or resolve names, or their paths are taken elsewhere
// (cd, git).
var noFileOperands = map[string]bool{
	"pwd": true, "which": true, "tr": true, "basename": true, "dirname": true, "id": true,
	"whoami": true, "uname": true, "printenv": true, "seq": true, "type": true, "df": true,
	"free": true, "uptime": true, "nproc": true, "arch": true, "locale": true, "tty": true,
	"groups": true, "ps": true, "echo": true, "printf": true, "true": true, "false": true,
	":": true, "test": true, "[": true, "sleep": true, "cd": true, "pushd": true, "popd": true,
	"dirs": true, "read": true, "mapfile": true, "readarray": true, "getopts": true,
	"git": true, "hostname": true, "set": true,
}

// TestEveryReaderHasPaths: a read-only command that reads files has a path spec, so an agent's
// hook, which runs it unconfined with only the path facts to hold a Read deny rule, sees what it
// reads. `egrep x ~/secret/f` once reported no path at all.
func TestEveryReaderHasPaths(t *testing.T) {
	t.Parallel()
	for name := range readOnly {
		if _, ok := pathSpecs[name]; !ok && !noFileOperands[name] {
			t.Errorf("%s is read-only but has no path spec: the files it reads go unreported", name)
		}
	}
}

// TestPathsOfFileOptions: a file given as an option's value, read by a read-only command, is a
// path fact (a Read deny rule on it must meet it), or the list is incomplete.
func TestPathsOfFileOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		want       string
		incomplete bool
	}{
		{"egrep x s/f", "read:/home/u/proj/s/f:egrep", false},
		{"fgrep -r x", "read:/home/u/proj:fgrep", false},
		{"sha384sum s/f", "read:/home/u/proj/s/f:sha384sum", false},
		// -c reads the files its list names.
		{"sha256sum -c s/f", "read:/home/u/proj/s/f:sha256sum", true},
		{"md5sum --quiet --check s/f", "read:/home/u/proj/s/f:md5sum", true},
		{"b2sum -wc s/f", "read:/home/u/proj/s/f:b2sum", true},
		{"cksum --ch s/f", "read:/home/u/proj/s/f:cksum", true},
		{"unexpand s/f", "read:/home/u/proj/s/f:unexpand", false},
		{"diff --from-file=s/f a", "read:/home/u/proj/s/f:diff read:/home/u/proj/a:diff", false},
		{"diff -u a b", "read:/home/u/proj/a:diff read:/home/u/proj/b:diff", false},
		{"du --files0-from=s/f", "read:/home/u/proj/s/f:du", true},     // and the files it names
		{"wc --files0-from=s/f", "read:/home/u/proj/s/f:wc", true},     // and the files it names
		{"sort --files0-from=s/f", "read:/home/u/proj/s/f:sort", true}, // and the files it names
		{"date -f s/f", "read:/home/u/proj/s/f:date", false},
		{"tree -H . --hintro=s/f d", "read:/home/u/proj/s/f:tree read:/home/u/proj/d:tree", false},
		{"tree --info --infofile s/f -L 2", "read:/home/u/proj/s/f:tree", false},
		{"date -d yesterday +%F", "", false},
		{"hexdump -fs/f a", "read:/home/u/proj/s/f:hexdump read:/home/u/proj/a:hexdump", false},
		{"strings @s/f", "read:/home/u/proj/s/f:strings read:/home/u/proj/@s/f:strings", true},
		{"git config -f s/f --list", "read:/home/u/proj/s/f:git", false},
		{"git config --file=s/f -l", "read:/home/u/proj/s/f:git", false},
		{"git config --blob=HEAD:s/f -l", "read:/home/u/proj/s/f:git", false},
		{"git config -f evil.cfg --includes -l", "read:/home/u/proj/evil.cfg:git", true},
		{"git grep -f s/f", "read:/home/u/proj/s/f:git read:/home/u/proj:git", false},
		// git grep's clusters as git reads them: a letter with a value takes the rest of the
		// cluster, or the next word when it ends it; so do -e, --file and the long ones.
		{"git grep -hf s/f", "read:/home/u/proj/s/f:git read:/home/u/proj:git", false},
		{"git grep -fs/f", "read:/home/u/proj/s/f:git read:/home/u/proj:git", false},
		{"git grep --file s/f", "read:/home/u/proj/s/f:git read:/home/u/proj:git", false},
		{"git grep --file=s/f a", "read:/home/u/proj/s/f:git read:/home/u/proj/a:git", false},
		{"git grep -eK ../top.key", "read:/home/u/top.key:git", false},
		{"git grep -e K ../top.key", "read:/home/u/top.key:git", false},
		{"git grep -eK HEAD:s/f", "read:/home/u/proj/s/f:git", false},
		{"git grep -e K HEAD:s/f", "read:/home/u/proj/s/f:git", false},
		{"git grep -iA 2 x s/f", "read:/home/u/proj/s/f:git", false},
		{"git grep -A2 x s/f", "read:/home/u/proj/s/f:git", false},
		{"git grep -5 -e x s/f", "read:/home/u/proj/s/f:git", false},
		{"git ls-files -X s/f", "read:/home/u/proj/s/f:git", false},
		{"git blame --ignore-revs-file=s/f a", "read:/home/u/proj/s/f:git read:/home/u/proj/a:git", false},
		{"jq --rawfile x s/f -n '$x'", "read:/home/u/proj/s/f:jq", false},
		{"jq -r .a x.json", "read:/home/u/proj/x.json:jq", false},
		// --argfile, --arg and --argjson take two words, in order: the words after them are
		// no option's value.
		{"jq -n --argfile N s/f '$ARGS.named'", "read:/home/u/proj/s/f:jq", false},
		{"jq -n --argfile --arg s/f '$ARGS.named'", "read:/home/u/proj/s/f:jq", false},
		{"jq --arg --rawfile x . s/f", "read:/home/u/proj/s/f:jq", false},
		{"jq --argjson n 1 . s/f", "read:/home/u/proj/s/f:jq", false},
		// The tests' programs may import modules from anywhere.
		{"jq --run-tests s/f", "read:/home/u/proj/s/f:jq", true},
		{"jq -n -L s 'import \"f\" as $d; $d'", "read:/home/u/proj/s:jq", true},
		{"jq -n 'include \"f\"; .'", "", true},
		{"find -files0-from s/f", "read:/home/u/proj/s/f:find", true},
		{"grep --color x s/f", "read:/home/u/proj/s/f:grep", false},
		{"grep --colour=always x s/f", "read:/home/u/proj/s/f:grep", false},
		{"jq -R --tab . s/f", "read:/home/u/proj/s/f:jq", false},
		{"find -L s -name x", "read:/home/u/proj/s:find", true},
		{"find -D tree -O2 s", "read:/home/u/proj/s:find", false},
		{"find -name x", "read:/home/u/proj:find", false},
		// -- ends find's leading options: the word after it is a root.
		{"find -- s -name x", "read:/home/u/proj/s:find", false},
		{"find -L -- s t", "read:/home/u/proj/s:find read:/home/u/proj/t:find", true},
		// A long option given whole is itself, not the start of a longer one that takes a
		// value: that reading took the pattern for the value and the file for the pattern.
		{`grep --binary "" s/f`, "read:/home/u/proj/s/f:grep", false},
		{"jq -R --slurp . s/f", "read:/home/u/proj/s/f:jq", false},
		{"rg --ignore x s", "read:/home/u/proj/s:rg", false},
		{"date -r s/f", "read:/home/u/proj/s/f:date", false},
		{"date --reference=s/f", "read:/home/u/proj/s/f:date", false},
		// rg --files takes no pattern: its one operand is the directory it lists.
		{"rg --files s", "read:/home/u/proj/s:rg", false},
		{"rg --files --hidden s t", "read:/home/u/proj/s:rg read:/home/u/proj/t:rg", false},
		// head's and tail's obsolete count is one word: -99c is 99 bytes, and the next word is a
		// file. grep's digits are options of their own: -5f takes the next word as its file.
		{"head -99c s/f", "read:/home/u/proj/s/f:head", false},
		{"tail -99c s/f", "read:/home/u/proj/s/f:tail", false},
		{"head -5 s/f -n 2 a", "read:/home/u/proj/s/f:head read:/home/u/proj/a:head", false},
		{"grep -5f s/f a", "read:/home/u/proj/s/f:grep read:/home/u/proj/a:grep", false},
		// rg's -r (--replace) takes a value, the rest of its cluster here: ^ is the pattern.
		{"rg -rA ^ s/f", "read:/home/u/proj/s/f:rg", false},
		{"rg --color never x s/f", "read:/home/u/proj/s/f:rg", false},
		{"rg --engine auto -e x s/f", "read:/home/u/proj/s/f:rg", false},
		// Each value-taking option takes its value, in a cluster too, and the value is no path.
		{"grep -D skip -e x s/f", "read:/home/u/proj/s/f:grep", false},
		{"du -d 1 s/f", "read:/home/u/proj/s/f:du", false},
		{"diff -U 3 a s/f", "read:/home/u/proj/a:diff read:/home/u/proj/s/f:diff", false},
	} {
		c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		if !c.ReadOnly {
			t.Errorf("%q: not read-only (%s)", tc.cmd, c.Reason)
		}
		var got []string
		for _, p := range c.Paths {
			if p.Alternative {
				continue // TestPaths has them
			}
			got = append(got, p.Access+":"+p.Path+":"+p.Cmd)
		}
		if g := strings.Join(got, " "); g != tc.want || c.PathsIncomplete != tc.incomplete {
			t.Errorf("%q: paths %q incomplete %v, want %q incomplete %v", tc.cmd, g, c.PathsIncomplete, tc.want, tc.incomplete)
		}
	}
}

// TestPathsDotDotThroughSymlink: the kernel takes a .. from where a symlink leads, so a .. after
// a name (or a leading one after a cd) leaves the lexical path unsure: with x/link ->
// /home/u/other, `cat x/link/../secret/f` reads /home/u/secret/f, not x/secret/f.
func TestPathsDotDotThroughSymlink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		incomplete bool
	}{
		{"cat x/link/../secret/f", true},
		{"cat < x/link/../secret/f", true},
		{"cd x/link && cat ../secret/f", true},
		{"cat ~/link/../f", true},
		{"cat ../x ./a/./b a..b/c", false},
		{"ls ..", false},
	} {
		c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		if !c.ReadOnly || c.PathsIncomplete != tc.incomplete {
			t.Errorf("%q: read-only %v, paths incomplete %v, want incomplete %v", tc.cmd, c.ReadOnly, c.PathsIncomplete, tc.incomplete)
		}
	}
}

// TestPathsCdFromStackOrSubstitution: zsh's `cd old new` goes to $PWD with old replaced by new
// (bash refuses it), and zsh's cd -N to an entry of the directory stack: where either leads is
// not known from the words, so the relative paths after it are not either.
func TestPathsCdFromStackOrSubstitution(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		incomplete bool
	}{
		{"cd proj secret && cat f", true},
		{"pushd proj secret && cat f", true},
		{"cd -1 && cat f", true},
		{"dirs /home/u/secret; pushd; cat f", true},
		{"pushd -n /home/u/secret; pushd -q; cat f", true},
		{"cd proj secret && ls", true},
		{"cd $D && ls", true},
		{"cd -q sub && cat f", false},
		{"cd -P -- sub && cat f", false},
	} {
		for _, sh := range []string{ShellBash, ShellZsh} {
			c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: sh})
			if c.PathsIncomplete != tc.incomplete {
				t.Errorf("%s: %q: paths incomplete %v, want %v", sh, tc.cmd, c.PathsIncomplete, tc.incomplete)
			}
		}
	}
}

// TestPathsZshLastPipeCd: zsh runs the last command of a pipeline in the shell itself, so a cd
// there lasts: `echo | cd ~/secret; cat f` reads ~/secret/f in zsh, ./f in bash.
func TestPathsZshLastPipeCd(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{ShellBash, ShellZsh} {
		c := Classify("echo | cd /home/u/secret; cat f", Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: sh})
		found := false
		for _, p := range c.Paths {
			found = found || p.Path == "/home/u/secret/f"
		}
		if want := sh == ShellZsh; found != want {
			t.Errorf("%s: paths %v, want /home/u/secret/f among them %v", sh, c.Paths, want)
		}
	}
	// bash does the same after `shopt -s lastpipe`: with a shopt on the line, a cd in a
	// pipeline's last command leaves the dir unknown.
	c := Classify("shopt -s lastpipe; echo | cd /home/u/secret; cat f", Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: ShellBash})
	if !c.PathsIncomplete || !c.PathsUnbounded {
		t.Errorf("bash with shopt: incomplete %v, unbounded %v; want both", c.PathsIncomplete, c.PathsUnbounded)
	}
}

// TestPathsThroughProcLinks: /proc/PID/root, cwd, exe, fd and map_files are links to files
// elsewhere: `cat /proc/self/root/home/u/secret/f` reads /home/u/secret/f, which the fact
// under /proc does not name.
func TestPathsThroughProcLinks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		incomplete bool
	}{
		{"cat /proc/self/root/home/u/secret/f", true},
		{"cat /proc/1/cwd/f", true},
		{"cat /proc/self/task/5/root/etc/x", true},
		{"cd /proc/self/root/home/u && cat secret/f", true},
		{"cat /proc/self/fd/3", true},
		{"cat /proc/cpuinfo /proc/self/status", false},
	} {
		c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		if !c.ReadOnly || c.PathsIncomplete != tc.incomplete {
			t.Errorf("%q: read-only %v, paths incomplete %v, want %v", tc.cmd, c.ReadOnly, c.PathsIncomplete, tc.incomplete)
		}
	}
}

// TestPathsGitPathspecMagic: git matches wildcards and pathspec magic itself, quoted or not:
// `git log -p -- '*.env'` and `git grep . -- ':/.env'` read .env, a name their words do not
// spell.
func TestPathsGitPathspecMagic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		incomplete bool
	}{
		{"git log -p -- '*.env'", true},
		{"git grep -h . -- ':/.env'", true},
		{"git show HEAD -- ':(top).env'", true},
		{"git diff HEAD -- 'sec?et'", true},
		{"git log -p -- .env", false},
		{"git show HEAD:.env", false},
	} {
		c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		if !c.ReadOnly || c.PathsIncomplete != tc.incomplete {
			t.Errorf("%q: read-only %v, paths incomplete %v, want %v", tc.cmd, c.ReadOnly, c.PathsIncomplete, tc.incomplete)
		}
	}
}

// TestPathsTree: a recursive search, diff or copy reads every file below a directory operand,
// which the fact says (Tree); a plain read or a copy's target does not.
func TestPathsTree(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]string{
		"grep -r key ~":         "/home/u:tree",
		"grep -rn key":          "/home/u/proj:tree",
		"egrep --recursive k d": "/home/u/proj/d:tree",
		"grep -d recurse k d":   "/home/u/proj/d:tree",
		"grep key f":            "/home/u/proj/f:",
		"rg key /etc":           "/etc:tree",
		"diff -r a b":           "/home/u/proj/a:tree /home/u/proj/b:tree",
		// Without -r, diff still reads the files directly in a directory operand, and
		// `diff DIR FILE` reads DIR/FILE's base name: `diff ~/.ssh ./id_rsa` prints
		// ~/.ssh/id_rsa. So does git diff, with --no-index or a path outside the repository,
		// and a git pathspec is every file below it.
		"diff a b":                            "/home/u/proj/a:tree /home/u/proj/b:tree",
		"diff /home/u/.ssh ./id_rsa":          "/home/u/.ssh:tree /home/u/proj/id_rsa:tree",
		"diff --to-file=/home/u/.ssh id_rsa":  "/home/u/.ssh:tree /home/u/proj/id_rsa:tree",
		"git diff --no-index /home/u/.ssh id": "/home/u/.ssh:tree /home/u/proj/id:tree",
		"git diff /home/u/.ssh id":            "/home/u/.ssh:tree /home/u/proj/id:tree",
		"git log -p -- secrets":               "/home/u/proj/secrets:tree",
		// git grep without a path searches the working tree below the cwd, as rg does:
		// --no-index and --untracked take the files git does not track too.
		"git grep --no-index -h ''": "/home/u/proj:tree",
		"git grep -e KEY":           "/home/u/proj:tree",
		"git grep KEY -- src":       "/home/u/proj/src:tree",
		"git grep -C 3 -h KEY":      "/home/u/proj:tree",
		"git grep --context 3 KEY":  "/home/u/proj:tree",
		"git grep -iA 3 KEY src":    "/home/u/proj/src:tree",
		"cp -a ~/.config backup":    "/home/u/proj/backup: /home/u/proj/backup/.config:tree /home/u/.config:tree",
		"cp f g":                    "/home/u/proj/g: /home/u/proj/g/f: /home/u/proj/f:",
		// Whole-tree writes: what is removed, moved or hard-linked below a dir, and what a
		// recursive copy writes over below where it lands.
		"rm -rf src":       "/home/u/proj/src:tree",
		"rm src/x":         "/home/u/proj/src/x:",
		"mv src s2":        "/home/u/proj/s2/src: /home/u/proj/s2: /home/u/proj/src:tree /home/u/proj/src:tree",
		"cp -al . copy":    "/home/u/proj/copy: /home/u/proj/copy:tree /home/u/proj:tree /home/u/proj:tree",
		"cp -r new/. src":  "/home/u/proj/src: /home/u/proj/src:tree /home/u/proj/new:tree",
		"find src -delete": "/home/u/proj/src: /home/u/proj/src:tree",
		"ln src/f.txt x":   "/home/u/proj/x: /home/u/proj/x/f.txt: /home/u/proj/src/f.txt:",
		"cat ~":            "/home/u:",
	} {
		c := Classify(cmd, testOpts)
		var got []string
		for _, p := range c.Paths {
			tree := ""
			if p.Tree {
				tree = "tree"
			}
			got = append(got, p.Path+":"+tree)
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("%q: paths %s, want %s", cmd, g, want)
		}
	}
}

// TestPathsCdInLoop: a loop runs its body again after a cd in it, so a command before the cd
// reads relative to the cd's target on the next pass, and two passes of `cd sub` land in
// sub/sub: `for i in 1 2; do cat id_rsa; cd ~/.ssh; done` reads ~/.ssh/id_rsa, which no path
// of the line named. A loop that changes the directory leaves its relative paths, and those
// after it, unknown.
func TestPathsCdInLoop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd        string
		incomplete bool
	}{
		{"for i in 1 2; do cat id_rsa; cd ~/.ssh; done", true},
		{"while true; do cat id_rsa; cd ~/.ssh; done", true},
		{"until false; do cat id_rsa; cd /x; done", true},
		{"select i in 1 2; do cat id_rsa; cd /x; done", true},
		{"while cat id_rsa; do cd /x; done", true},
		{"while read l; do head -1 $l; done < f; cat g", true},
		{"for i in 1 2; do cd sub; done; cat f", true},
		{"for i in 1 2; do cd /etc; done; cat /x/f", false},
		{"for i in 1 2; do cat f; done", false},
		{"for i in 1 2; do echo | cd /x; cat f; done", false},
		{"for i in 1 2; do (cd /x; cat /y); cat f; done", false},
		{"cd /x; for i in 1 2; do cat f; done", false},
	} {
		for _, sh := range []string{ShellBash, ShellZsh} {
			if sh == ShellZsh && strings.Contains(tc.cmd, "echo |") {
				continue // zsh's cd at a pipeline's end lasts
			}
			c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: sh})
			if c.PathsIncomplete != tc.incomplete {
				t.Errorf("%s: %q: paths incomplete %v, want %v (%v)", sh, tc.cmd, c.PathsIncomplete, tc.incomplete, c.Paths)
			}
		}
	}
}

// TestPathsRedirectOnlyAfterCd: a statement of redirections alone (in zsh `< f` prints f), or a
// [[ ]], (( )), declaration or let with redirections, opens its files where the cds before it
// led, as a command does: `cd ~/.ssh; < id_rsa` reads ~/.ssh/id_rsa.
func TestPathsRedirectOnlyAfterCd(t *testing.T) {
	t.Parallel()
	checkReadsOrUnknown(t, "/home/u/.ssh/id_rsa", []string{
		"cd /home/u/.ssh; < id_rsa",
		"cd /home/u/.ssh; [[ -n x ]] < id_rsa",
		"cd /home/u/.ssh; let x=1 < id_rsa",
		"cd /home/u/.ssh; declare x < id_rsa",
	})
}

// TestPathsFileLists: --files0-from=F reads the files F names (from stdin for -), which no
// word of the line does: `printf '/home/u/.ssh/id_rsa\0' | sort --files0-from=-` prints it.
func TestPathsFileLists(t *testing.T) {
	t.Parallel()
	checkIncomplete(t, testOpts, []incompleteCase{
		{`printf '/home/u/.ssh/id_rsa\0' | sort --files0-from=-`, true},
		{"sort --files0-from list", true},
		{"sort --files0=list", true},
		{"wc --files0-from=- < list", true},
		{"du --files0-from=list", true},
		{"sort -u a b", false},
		{"wc -l a", false},
	})
}

// TestPathsGitConfigFiles: git config's reads and git var -l print the config files git reads
// by default, which no word names: the user's ~/.gitconfig and ~/.config/git/config, the
// system's /etc/gitconfig, the repository's .git/config; a scope names its own.
func TestPathsGitConfigFiles(t *testing.T) {
	t.Parallel()
	all := "/home/u/.gitconfig /home/u/.config/git/config /etc/gitconfig /home/u/proj/.git/config"
	for cmd, want := range map[string]string{
		"git config -l":                all,
		"git config user.email":        all,
		"git var -l":                   all,
		"git config --global --list":   "/home/u/.gitconfig /home/u/.config/git/config",
		"git config --system -l":       "/etc/gitconfig",
		"git config --local --get x.y": "/home/u/proj/.git/config",
		"git config -f x -l":           "/home/u/proj/x",
		"git var GIT_EDITOR":           "",
		"git status":                   "",
	} {
		c := Classify(cmd, testOpts)
		var got []string
		for _, p := range c.Paths {
			got = append(got, p.Path)
		}
		if g := strings.Join(got, " "); g != want {
			t.Errorf("%q: paths %s, want %s", cmd, g, want)
		}
	}
}

// TestPathsGitNamesFromStdin: git cat-file --batch and the --stdin of log, diff-tree, ... take
// their object names and pathspecs from stdin, which no word shows: `echo HEAD:.env | git
// cat-file --batch` prints .env as `git cat-file -p HEAD:.env` does.
func TestPathsGitNamesFromStdin(t *testing.T) {
	t.Parallel()
	checkIncomplete(t, testOpts, []incompleteCase{
		{"echo HEAD:.env | git cat-file --batch", true},
		{"echo HEAD:.env | git cat-file --batch-command", true},
		{"echo HEAD:.env | git cat-file '--batch=%(objectname) %(rest)'", true},
		{`printf -- '--\n.env\n' | git log -p --stdin`, true},
		{"git rev-list HEAD | git diff-tree --stdin -p", true},
		{"git cat-file -t HEAD", false},
		{"git log -p -3", false},
	})
}

// TestPathsCdThroughPrecommands: builtin, command (bash), noglob and nocorrect (zsh) run cd in
// the shell itself, one inside another and after -- or -p too: `command builtin cd ~/.ssh;
// cat id_rsa` reads ~/.ssh/id_rsa.
func TestPathsCdThroughPrecommands(t *testing.T) {
	t.Parallel()
	checkReadsOrUnknown(t, "/home/u/.ssh/id_rsa", []string{
		"command builtin cd /home/u/.ssh; cat id_rsa",
		"builtin command cd /home/u/.ssh; cat id_rsa",
		"command -- cd /home/u/.ssh; cat id_rsa",
		"command -p cd /home/u/.ssh; cat id_rsa",
		"builtin -- cd /home/u/.ssh; cat id_rsa",
		"noglob cd /home/u/.ssh; cat id_rsa",
		"nocorrect cd /home/u/.ssh; cat id_rsa",
		"noglob builtin cd /home/u/.ssh; cat id_rsa",
	})
	c := Classify("command -v cd; cat f", testOpts)
	if len(c.Paths) != 1 || c.Paths[0].Path != "/home/u/proj/f" || c.PathsIncomplete {
		t.Errorf("command -v cd looks cd up, it does not run it: paths %v", c.Paths)
	}
}

// TestPathsOfLaterScripts: trap's action and an alias's value run later in the line, after
// whatever cd comes before then: `trap 'cat id_rsa' EXIT; cd ~/.ssh` reads ~/.ssh/id_rsa.
func TestPathsOfLaterScripts(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{
		"trap 'cat /home/u/.ssh/id_rsa' EXIT",
		"alias c='cat /home/u/.ssh/id_rsa'",
	} {
		c := Classify(cmd, testOpts)
		found := false
		for _, p := range c.Paths {
			found = found || p.Path == "/home/u/.ssh/id_rsa"
		}
		if !found {
			t.Errorf("%q: paths %v, want /home/u/.ssh/id_rsa among them", cmd, c.Paths)
		}
	}
	for _, cmd := range []string{"trap 'cat id_rsa' EXIT; cd /home/u/.ssh", "alias c='cat id_rsa'; cd /home/u/.ssh; c"} {
		if c := Classify(cmd, testOpts); !c.PathsIncomplete {
			t.Errorf("%q: paths %v complete, want incomplete", cmd, c.Paths)
		}
	}
}

// TestPathsFunctionBody: a function's body runs where it is called, after any cd before the
// call, and as often: `f() { cat id_rsa; }; cd ~/.ssh; f` reads ~/.ssh/id_rsa.
func TestPathsFunctionBody(t *testing.T) {
	t.Parallel()
	checkIncomplete(t, testOpts, []incompleteCase{
		{"f() { cat id_rsa; }; cd /home/u/.ssh; f", true},
		{"f() { cd /home/u/.ssh; }; f; cat id_rsa", true},
		{"function f { cat id_rsa; }; cd /home/u/.ssh; f", true},
		{"f() { cat /etc/hosts; }; f", false},
	})
}

// TestPathsOfFoundOrPipedNames: xargs and parallel give the command the names they read (from
// stdin, or -a FILE), and find -exec the names it finds below its roots, which no word shows:
// `echo ~/.ssh/id_rsa | xargs cat` and `find ~/.ssh -exec cat {} +` read ~/.ssh/id_rsa.
func TestPathsOfFoundOrPipedNames(t *testing.T) {
	t.Parallel()
	checkIncomplete(t, testOpts, []incompleteCase{
		{"echo /home/u/.ssh/id_rsa | xargs cat", true},
		{"xargs -a list cat", true},
		{"echo /home/u/.ssh/id_rsa | xargs -n1 head -5", true},
		{"find . | parallel cat", true},
		{"echo x | xargs", true},
		{"cat list", false},
	})
	for cmd, want := range map[string]string{
		"find /home/u/.ssh -name id_rsa -exec cat {} ;": "/home/u/.ssh",
		"find -execdir cat {} +":                        "/home/u/proj",
		"find /home/u/.ssh -L -ok cat {} ;":             "/home/u/.ssh",
	} {
		c := Classify(strings.ReplaceAll(cmd, ";", `\;`), testOpts)
		tree := false
		for _, p := range c.Paths {
			tree = tree || p.Path == want && p.Tree && p.Cmd == "find"
		}
		if !tree {
			t.Errorf("%q: paths %v, want a tree read of %s", cmd, c.Paths, want)
		}
	}
}

// TestPathsCdVarsSetInLine: CDPATH (zsh's cdpath) moves a relative cd and HOME is what ~ and a
// bare cd mean: a line that sets one, however (HOME=x, export, read, a prefix), leaves its cds
// and ~ unknown: `HOME=/home/u/.ssh; cat ~/id_rsa` reads ~/.ssh/id_rsa.
func TestPathsCdVarsSetInLine(t *testing.T) {
	t.Parallel()
	checkIncomplete(t, testOpts, []incompleteCase{
		{"CDPATH=/home/u cd .ssh; cat id_rsa", true},
		{"CDPATH=/home/u; cd .ssh; cat id_rsa", true},
		{"export CDPATH=/home/u; cd .ssh && cat id_rsa", true},
		{"cdpath=(/home/u); cd .ssh; cat id_rsa", true},
		{"HOME=/home/u/.ssh; cat ~/id_rsa", true},
		{"HOME=/home/u/.ssh git config --global -l", true},
		{"echo /home/u/.ssh | read HOME; cd; cat id_rsa", true},
		{"HOME=/home/u/.ssh bash -c 'cat ~/id_rsa'", true},
		{"cat $HOME/x ~/y", true}, // $HOME is not static anyway
		{"echo ${HOME}; cd sub; cat ~/f", false},
		{"cd sub; cat ~/f", false},
	})
}

// TestPathsZshEquals: zsh expands a word =NAME to the path of the command NAME on $PATH
// (EQUALS, on by default): `cat =deploy-key` reads ~/bin/deploy-key, not ./=deploy-key.
func TestPathsZshEquals(t *testing.T) {
	t.Parallel()
	for _, sh := range []string{ShellBash, ShellZsh} {
		c := Classify("cat =deploy-key", Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: sh})
		if want := sh == ShellZsh; c.PathsIncomplete != want {
			t.Errorf("%s: paths incomplete %v, want %v (%v)", sh, c.PathsIncomplete, want, c.Paths)
		}
	}
}

// incompleteCase is a command and whether its paths are incomplete (the call then asks).
type incompleteCase struct {
	cmd        string
	incomplete bool
}

// checkIncomplete classifies each case with opts and checks PathsIncomplete.
func checkIncomplete(t *testing.T, opts Options, cases []incompleteCase) {
	t.Helper()
	for _, tc := range cases {
		c := Classify(tc.cmd, opts)
		if c.PathsIncomplete != tc.incomplete {
			t.Errorf("%q: paths incomplete %v, want %v (%v)", tc.cmd, c.PathsIncomplete, tc.incomplete, c.Paths)
		}
	}
}

// checkReadsOrUnknown checks that each command, read by bash and by zsh from /home/u/proj, reads
// want among its paths or leaves its paths incomplete (the call then asks).
func checkReadsOrUnknown(t *testing.T, want string, cmds []string) {
	t.Helper()
	for _, cmd := range cmds {
		for _, sh := range []string{ShellBash, ShellZsh} {
			c := Classify(cmd, Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: sh})
			if !c.PathsIncomplete && !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == want }) {
				t.Errorf("%s: %q: paths %v, want %s among them", sh, cmd, c.Paths, want)
			}
		}
	}
}

// TestPathsHardLinks: a hard link's source is written through the new name, so it counts as
// written (ln without -s, cp -l); a symlink's target is resolved where it is used instead.
func TestPathsHardLinks(t *testing.T) {
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u"}
	written := func(c *Classification, p string) bool {
		return slices.ContainsFunc(c.Paths, func(u PathUse) bool { return u.Path == p && u.Access == AccessWrite })
	}
	for cmd, want := range map[string]bool{
		`ln ~/.bashrc x`: true, `ln -f ~/.bashrc`: true, `ln -t d ~/.bashrc`: true, `cp -l ~/.bashrc x`: true,
		`cp -al ~/.bashrc x`: true, `cp --link ~/.bashrc x`: true,
		`ln -s ~/.bashrc x`: false, `ln --symbolic ~/.bashrc x`: false, `cp ~/.bashrc x`: false,
	} {
		if got := written(Classify(cmd, opts), "/home/u/.bashrc"); got != want {
			t.Errorf("%q: ~/.bashrc written %v, want %v", cmd, got, want)
		}
	}
}

// TestPathsGitMessageFiles: a message or template file git reads into a commit, a tag, a note
// or a merge is a read of it, in sandboxd as through the hook (`git commit -F ~/.ssh/id_rsa`).
func TestPathsGitMessageFiles(t *testing.T) {
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u"}
	for _, cmd := range []string{"git commit -F s/f", "git commit --file=s/f", "git commit -t s/f",
		"git tag -a v1 -Fs/f", "git merge -F s/f main", "git notes add -F s/f", "git fmt-merge-msg --file s/f",
		"git archive --add-file=s/f HEAD", "git add --pathspec-from-file=s/f", "git reset --pathspec-from-file s/f",
		"git format-patch --stdout --signature-file=s/f -1", "git format-patch --cover-letter --description-file s/f -1",
		"git -c http.sslKey=s/f fetch", "git -c http.proxySSLCert=s/f fetch"} {
		c := Classify(cmd, opts)
		if !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == "/home/u/proj/s/f" && p.Access == AccessRead && !p.Mention }) {
			t.Errorf("%q: paths %+v, want s/f read", cmd, c.Paths)
		}
	}
	// A local repository git takes objects from is read whole; a URL or a remote's name is not.
	for cmd, want := range map[string]string{
		"git clone /home/u/other x": "/home/u/other", "git clone ~/other": "/home/u/other",
		"git clone file:///home/u/other x": "/home/u/other", "git fetch ../other HEAD": "/home/u/other",
		"git pull ~/other main": "/home/u/other", "git archive --remote=/home/u/other HEAD": "/home/u/other",
		"git clone --reference ~/other https://x/y.git": "/home/u/other",
		"git fetch origin": "", "git clone https://example.com/r.git": "", "git clone host:r.git": "",
	} {
		c := Classify(cmd, opts)
		tree := slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == want && p.Tree && p.Access == AccessRead })
		if want != "" && !tree {
			t.Errorf("%q: paths %+v, want %s read whole", cmd, c.Paths, want)
		}
		if want == "" && slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Tree }) {
			t.Errorf("%q: paths %+v, want no repository read", cmd, c.Paths)
		}
	}
}

// TestPathsGitConfigWrites: git commands that set what a later git runs (core.fsmonitor, an
// alias, a template's hooks) write the config file they go to, so the protected paths hold
// them in a command the agent runs itself; reading the config writes nothing.
func TestPathsGitConfigWrites(t *testing.T) {
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u"}
	for cmd, want := range map[string]string{
		`git config core.fsmonitor "touch /tmp/x"`: "/home/u/proj/.git/config",
		`git config set core.pager x`:              "/home/u/proj/.git/config",
		`git config --unset core.pager`:            "/home/u/proj/.git/config",
		`git config --type=bool a.b true`:          "/home/u/proj/.git/config",
		`git config --global alias.st '!id'`:       "/home/u/.gitconfig",
		`git config --file ~/.bashrc a.b c`:        "/home/u/.bashrc",
		`git config -f~/.bashrc a.b c`:             "/home/u/.bashrc",
		`git clone -c core.fsmonitor=x /srv/r d`:   "/home/u/proj/.git/config",
		`git init --template=/tmp/t`:               "/home/u/proj/.git/hooks",
		`git submodule add /srv/r s`:               "/home/u/proj/.gitmodules",
		`git maintenance start`:                    "/home/u/.config/systemd/user",
		// Files git writes what it prints into.
		`git log --format=%s --output=/home/u/.bashrc`: "/home/u/.bashrc",
		`git diff --output .git/hooks/pre-commit`:      "/home/u/proj/.git/hooks/pre-commit",
		`git archive -o ~/.bashrc HEAD`:                "/home/u/.bashrc",
		`git format-patch -o .git/hooks HEAD~1`:        "/home/u/proj/.git/hooks",
		`git bundle create ~/.bashrc HEAD`:             "/home/u/.bashrc",
	} {
		c := Classify(cmd, opts)
		if !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == want && p.Access == AccessWrite }) {
			t.Errorf("%q: paths %+v, want %s written", cmd, c.Paths, want)
		}
	}
	for _, cmd := range []string{`git config user.name`, `git config --get core.pager`, `git config -l`, `git config get user.name`,
		`git config --type bool a.b`, `git -c core.pager=cat log`, `git clone /srv/r d`, `git submodule update`, `git log -1`, `git archive HEAD`} {
		if c := Classify(cmd, opts); slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Access == AccessWrite }) {
			t.Errorf("%q: writes %+v", cmd, c.Paths)
		}
	}
}

// TestPathsPkgConfigWrites: npm's, pnpm's and yarn's settings run code at the user's next
// install, so setting them writes the files they may go to.
func TestPathsPkgConfigWrites(t *testing.T) {
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u"}
	for cmd, want := range map[string]string{
		`npm config set script-shell /tmp/evil`:   "/home/u/.npmrc",
		`npm set node-options "--require /tmp/x"`: "/home/u/proj/.npmrc",
		`pnpm config delete registry`:             "/home/u/.npmrc",
		`yarn config set yarnPath /tmp/x.js`:      "/home/u/proj/.yarnrc.yml",
		// Other tools' settings and the programs they put on PATH.
		`go env -w GOFLAGS=-toolexec=/tmp/x`:                     "/home/u/.config/go/env",
		`go install example.com/x@latest`:                        "/home/u/go/bin",
		`kubectl config set-credentials x --exec-command=/tmp/x`: "/home/u/.kube/config",
		`aws configure set default.credential_process /tmp/x`:    "/home/u/.aws/config",
		`systemctl --user enable x.service`:                      "/home/u/.config/systemd/user",
		`pip config set global.index-url http://x`:               "/home/u/.config/pip/pip.conf",
		`pip install --user x`:                                   "/home/u/.local/bin",
		`rustup default nightly`:                                 "/home/u/.rustup",
		`gh alias set co '!id'`:                                  "/home/u/.config/gh",
		`cargo install ripgrep`:                                  "/home/u/.cargo/bin",
		`python3 -m pip config set global.trusted-host x`:        "/home/u/.config/pip/pip.conf",
		`pip3.11 install --user x`:                               "/home/u/.local/bin",
		// script(1)'s typescript, before or after its options, and its logs.
		`script ~/.bashrc -aqc "echo x"`:   "/home/u/.bashrc",
		`script -q -c true /home/u/x`:      "/home/u/x",
		`script -qc true`:                  "/home/u/proj/typescript",
		`script -c true -O ~/out.log t`:    "/home/u/out.log",
		`script --log-io=/home/u/io.log t`: "/home/u/io.log",
	} {
		c := Classify(cmd, opts)
		if !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == want && p.Access == AccessWrite }) {
			t.Errorf("%q: paths %+v, want %s written", cmd, c.Paths, want)
		}
	}
	for _, cmd := range []string{`npm config get registry`, `npm install`, `npm run build`, `yarn install`,
		`go env GOPATH`, `go build ./...`, `kubectl config view`, `aws configure get region`, `systemctl --user status x`,
		`systemctl enable x`, `pip install -e .`, `rustup show`, `gh pr list`, `cargo build`, `script -qc "git log -1" /dev/null`} {
		if c := Classify(cmd, opts); slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Access == AccessWrite }) {
			t.Errorf("%q: writes %+v", cmd, c.Paths)
		}
	}
	// kubectl prints its config, credentials too: a read a deny rule on ~/.kube holds.
	if c := Classify(`kubectl config view --raw`, opts); !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == "/home/u/.kube/config" && p.Access == AccessRead }) {
		t.Errorf("kubectl config view: paths %+v", c.Paths)
	}
}

// TestPathsUnbounded: a path known only at run time leaves the list incomplete; it is unbounded
// when it may lie anywhere, bounded when it is a glob under a directory the line names. The
// modes count only a bounded line as inside the session's directories.
func TestPathsUnbounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd                   string
		incomplete, unbounded bool
	}{
		{"cat *.go", true, false},
		{"wc -l src/*/*.go", true, false},
		{"cd src && cat *.go", true, false},
		{"diff <(sort a) <(sort b)", false, false},
		{"while read l; do echo $l; done < <(ls)", false, false},
		{"cat README.md", false, false},
		{"cat $HOME/x", true, true},
		{`cat "$(echo /etc/hosts)"`, true, true},
		{"cat ${x:-/etc/hosts}", true, true},
		{"cat ~root/.bashrc", true, true},
		{"cat ~+/../x", true, true},
		{"cat ~-/x", true, true},
		{"cat /etc/*", true, true},
		{"cat ../*", true, true},
		{"cat */../../x", true, true},
		{"cat x{,/../../etc/hosts}", true, true},
		{"cat {~,x}/y", true, true},
		{"cd $D && cat *", true, true},
		{"cat < ./$f", true, true},
		{"echo /etc/hosts | xargs cat", true, true},
		{"cat <(cat $HOME/x)", true, true},
		{"bash -c 'cat $HOME/x'", true, true},
		{"bash -c 'cat *.go'", true, false},
		{"ls *(e:'touch pwned':)", true, false},
		{"ls +(a|b).go", true, false},
		{"cat @(/etc/hosts|x)", true, true},
		{"cat @(x|~/y)", true, true},
		{"cat '/etc/'*(x)", true, true},
		{"cat $d/*(x)", true, true},
		{"cd src && bash -c 'cat *.go'", true, true},
		{"ls {x,}~/x", true, true},
		// Braces that give a word expanded again (~) are judged by what they give.
		{"cat {x,~}/secret.txt", true, true},
		// A write glob that may name a dot entry (a repository's .git) goes unseen by its text.
		{"rm -rf {.,}g*", true, true},
		{"rm -rf .g*", true, true},
		{"rm -rf src/.[g]it", true, true},
		{"rm -rf build/*.o", true, false},
		{"cat .g*/config", true, false},
	} {
		c := Classify(tc.cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		if c.PathsIncomplete != tc.incomplete || c.PathsUnbounded != tc.unbounded {
			t.Errorf("%q: incomplete %v unbounded %v, want %v %v", tc.cmd, c.PathsIncomplete, c.PathsUnbounded, tc.incomplete, tc.unbounded)
		}
	}
}

// TestPathsOfBraces: a word with braces names each word they give, as bash gives it: what
// its text alone shows (a dir under the cwd) is not where .{.,}/x or {x,}/etc/passwd lead.
func TestPathsOfBraces(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string][]string{
		"cat .{.,}/secret.txt":              {"/home/u/secret.txt:read", "/home/u/proj/secret.txt:read"},
		"cat {x,}/home/v/secret.txt":        {"/home/u/proj/x/home/v/secret.txt:read", "/home/v/secret.txt:read"},
		"touch {x,}/home/u/.bashrc":         {"/home/u/.bashrc:write"},
		"rm -rf .gi{t,}":                    {"/home/u/proj/.git:write"},
		"rm -rf .g{h..j}t":                  {"/home/u/proj/.git:write"},
		"rm -rf .{pytest_cache,mypy_cache}": {"/home/u/proj/.pytest_cache:write", "/home/u/proj/.mypy_cache:write"},
		"cat {a,{b,c}}/{d,e}":               {"/home/u/proj/a/d:read", "/home/u/proj/c/e:read"},
		"ls {a,b}/x":                        {"/home/u/proj/a/x:read", "/home/u/proj/b/x:read"},
	} {
		c := Classify(cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		var got []string
		for _, p := range c.Paths {
			got = append(got, p.Path+":"+p.Access)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %s not among %q", cmd, w, got)
			}
		}
	}
}

// TestBracesExpandOnce: a word brace expansion gave is never expanded again (bash expands
// braces once): an unclosed brace ({*) gives itself back, which must not recurse (a stack
// overflow is fatal to the daemon, not a recovered panic).
func TestBracesExpandOnce(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"find . -exec rm {*", "rm {*", "rm -rf x{a,{*}", "cat {a}", "rm {{{{*"} {
		c := Classify(cmd, Options{Cwd: "/home/u/proj", Home: "/home/u"})
		if c.Reason == "internal_error" || (c.ReadOnly && strings.HasPrefix(cmd, "rm")) {
			t.Errorf("%q: read-only %v, reason %s", cmd, c.ReadOnly, c.Reason)
		}
	}
}

// TestGitObjectsUnseen: a git read of paths the line does not show (from elsewhere, names on
// stdin, pathspec magic) is flagged, as any Read rule may be one it meets; a git command
// that reads no repository copy of a file, or names its paths, is not.
func TestGitObjectsUnseen(t *testing.T) {
	for cmd, want := range map[string]bool{
		"git -C .. show HEAD:.env":                               true,
		"git --git-dir=../.git log -p":                           true,
		"echo HEAD:.env | git cat-file --batch":                  true,
		"git log -p -- ':/.env'":                                 true,
		"git grep -h . HEAD -- '*.env'":                          true,
		"git show $REV:.env":                                     true,
		"git -C .. status":                                       false,
		"git show HEAD:.env":                                     false,
		"git -c include.path=k config -l":                        false,
		"echo HEAD:.env | git cat-file --batch; git -C x status": true,
	} {
		if got := Classify(cmd, testOpts).GitObjectsUnseen; got != want {
			t.Errorf("%q: git_objects_unseen %v, want %v", cmd, got, want)
		}
	}
	c := Classify("git -c include.path=../o/k config --list", testOpts)
	if !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == "/home/u/o/k" && p.Access == AccessRead }) {
		t.Errorf("git -c include.path=FILE: paths %+v, want FILE read", c.Paths)
	}
}

// TestListsThroughLinksUnbounded: a walk that follows the links it meets (find -L, ls -LR,
// du -L, tree -l) lists and stats wherever they lead, so its paths are not the dirs it names;
// the same walk without following stays within them.
func TestListsThroughLinksUnbounded(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]bool{
		"find -L .": true, "find . -follow -name x": true, "ls -LR": true, "ls -lLR .": true, "ls --dereference -R src": true,
		"du -aL .": true, "tree -l": true,
		"find .": false, "ls -R": false, "ls -L x": false, "du -a .": false, "tree": false,
	} {
		if c := Classify(cmd, testOpts); c.PathsUnbounded != want || !c.ReadOnly {
			t.Errorf("%q: paths unbounded %v, read-only %v; want unbounded %v, read-only", cmd, c.PathsUnbounded, c.ReadOnly, want)
		}
	}
}

// TestSymbolicLinksMadeUnbounded: a symbolic link the line makes, moves or copies as a link
// leads the names below it elsewhere (`ln -s .. up; cat up/keys/id.key`), so the line's other
// paths may lie anywhere; a line that only makes the link, or copies files' contents, leads
// nowhere new.
func TestSymbolicLinksMadeUnbounded(t *testing.T) {
	t.Parallel()
	for cmd, want := range map[string]bool{
		"ln -s .. up; cat up/k": true, "ln -sfn / r; cat r/x": true, "ln --symbolic a b; cat b": true, "ln -st d ..; ls d/x": true,
		"cp -s a b; cat b": true, "cp -rs / h; cat h/k": true, "cp --symbolic-link a b; cat b": true, "busybox ln -s .. up; cat up/k": true,
		"bash -c 'ln -s .. up'; cat up/k": true,
		"ln -s .. up; cd up":              true, "ln -s .. up; cat u*/k": true, "cp -s a b && cat b/x": true,
		"ln -s a b": false, "ln -sf ../x y && ls": false,
		// A link moved, copied as a link, hard-linked, or unpacked; a dir holding links moved.
		"mv pre/upl up; cat up/keys/id.key": true, "cp -a pre/upl up; cat up/k": true, "cp -P l u; cat u/k": true,
		"cp -d l u; cat u/k": true, "cp --no-dereference l u; cat u/k": true, "cp -r d e; cat e/h/k": true,
		"ln pre/upl up; cat up/k": true, "link pre/upl up; cat up/k": true, "sh -c 'mv pre/upl up'; cat up/k": true,
		"mv deep y; cat y/a/h/k": true, "tar xf l.tar; cat upl/k": true, "rsync -a d/ e/; cat e/k": true,
		"cp a b; cat b": false, "cp -L l u; cat u/k": false, "cat up/k": false, "mv a b": false,
	} {
		if c := Classify(cmd, testOpts); c.PathsUnbounded != want {
			t.Errorf("%q: paths unbounded %v, want %v", cmd, c.PathsUnbounded, want)
		}
	}
}

// TestCriticalRmSpellings: an rm whose target may be the cwd, the home or an ancestor only when
// the line runs is critical too: a glob that matches one, ~user/R, and R after a cd the line
// cannot follow where the cwd ends in R. One that can only name other files is not.
// TestCriticalRmAfterCdUnconfined: outside a sandbox the agent's own environment may set
// CDPATH, so a cd to a bare name may land anywhere (the cwd itself, with CDPATH=..); a cd to
// a path does not.
func TestCriticalRmAfterCdUnconfined(t *testing.T) {
	t.Parallel()
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u", Unconfined: true}
	for cmd, want := range map[string]bool{
		"cd build && rm -rf *": true, "cd ./build && rm -rf *": false, "cd /home/u/proj/build && rm -rf *": false,
	} {
		if got := slices.Contains(Classify(cmd, opts).Risks, RiskCriticalPathRm); got != want {
			t.Errorf("%q: critical %v, want %v", cmd, got, want)
		}
	}
}

func TestCriticalRmSpellings(t *testing.T) {
	t.Parallel()
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u"}
	for cmd, want := range map[string]bool{
		"rm -rf /home/u/pro?": true, "rm -rf /home/u/p*": true, "rm -rf /home/[u]": true, "rm -rf /u*": true,
		"rm -rf ~u/proj": true, "rm -rf ~u": true, "rm -rf ~+": true, `cd "$HOME" && rm -rf proj`: true,
		`cd "$X" && rm -rf ..`: true, "=rm -rf ~": true, "nocorrect rm -rf ~": true,
		"rm -rf *.o": false, "rm -rf build": false, `cd "$X" && rm -rf build`: false, "rm -rf src/*.o": false,
		"rm -rf ~u/proj/build": false,
		// A glob with letters of its own that names the cwd, or everything in it.
		"rm -rf ~/pro[j]/*": true, "rm -rf /home/u/pro?/*": true, "rm -rf ../pro[j]/*": true, "rm -rf ~/pro[j]": true,
		"find ~/pro[j] -delete": true, "rm -rf ../pro[j]/?*": true, "rm -rf /home/u/p*/*/": true,
		"rm -rf ~/pro${x:-j}": true, "rm -rf ../pro${x:-j}": true, "rm -rf /home/u/pro${x:-j}": true, `rm -rf "${x-~}"`: true,
		`rm -rf ~/"pro${x:=j}"/`: true, "rm -rf ~/pro${x:-j}/build": false, "rm -rf ~/proj/${x:-build}": false,
		// A word of its own text with expansions, read with them empty or as the line sets them.
		"x=proj; rm -rf ../$x": true, "rm -rf ../proj${x}": true, "rm -rf ../$(echo proj)": true, "rm -rf /home/u${x}": true,
		`rm -rf ../"$(basename $PWD)"`: true, "x=oj; rm -rf ~/pr$x": true,
		"rm -rf ./$f": false, `rm -rf "$dir"/x.o`: false, `rm -f -- "$f"`: false, "rm -rf ../build-$x": false, "x=b; rm -rf ./$x": false,
		"rm -rf ~/pro[j]/build": false, "rm -rf */__pycache__": false, "rm -f */*.pyc": false, "rm -rf ./*/x": false,
		"rm -rf ../../../../proc/self/cwd/": true, "cd / && rm -rf p*/self/cwd/": true, "rm -rf ../pro[j]/*.o": false, "rm -rf /home/u/pro?/src/*": false,
		// After cd DIR &&, the next command is in DIR only; after cd DIR; or a failure further
		// on, in the cwd too. CDPATH and HOME the line may set move a cd to a bare name or ~.
		"cd build && rm -rf *": false, "cd build && rm -rf ./*": false, "cd build 2>/dev/null && rm -rf * .[!.]*": false,
		"pushd build && { rm -rf *; }": false, "cd ./build && find . -delete": false, "rm -rf *": true,
		"cd build; rm -rf *": true, "cd build || rm -rf *": true, "! cd build && rm -rf *": true, "cd build && true; rm -rf *": true,
		"cd build && cd .. && rm -rf *": true, "cd build && rm -rf ../*": true, "cd build && rm -rf * && cd .. && rm -rf *": true,
		"cd && rm -rf *": true, "cd ~ && rm -rf *": true, "x$(cd build) && rm -rf *": true, `cd "$d" && rm -rf *`: true,
		"CDPATH=.. cd proj && rm -rf *": true, "CDPATH=/ cd home && rm -rf u": true, "HOME=/; cd && rm -rf home/u": true,
		// What moves a cd by means the line's words do not spell: the cwd is judged too.
		`declare CDPA""TH=..; cd proj && rm -rf *`: true, `v=CDP; v+=ATH; printf -v "$v" ..; cd proj && rm -rf *`: true,
		`shopt -s cdable_var""s; b=..; cd b && rm -rf *`: true, `eval "CDPA""TH=.."; cd proj && rm -rf *`: true,
		"enable -n cd; cd build && rm -rf *": true, "source x; cd build && rm -rf *": true,
		"cd() { builtin cd ..; }; cd build && rm -rf *": true, `printf '%s\n' "$x"; cd build && rm -rf *`: true,
		// The && rule holds for the line's first and only cd, to a plain name: a cd after a
		// command that may have made a link, a .. (taken physically after a link), an option,
		// a function named cd, or a second cd keep the cwd judged.
		"cd -P sub/l/.. && rm -rf *": true, "cd sub/l/../zz/.. && rm -rf *": true, "cd sub/l && cd ../zz/.. && rm -rf *": true,
		"python3 -c x && cd x && rm -rf *": true, "cd() { :; }; cd build && rm -rf *": true, "x=1; cd build && rm -rf *": true,
		"cd build && rm -rf * && cd .. && ls": true,
		// cd DIR || exit: past it the line is in DIR or has ended.
		"cd build || exit 1; rm -rf *": false, "cd build || { echo no >&2; exit 1; }; rm -rf *": false,
		// if cd DIR; then …; fi, with no else: the then part runs where the cd went.
		"if cd build; then rm -rf *; fi": false, "if cd build 2>/dev/null; then rm -rf ./*; fi": false,
		"if cd build; then rm -rf *; else rm -rf *; fi": true, "if ! cd build; then rm -rf *; fi": true,
		"if cd build; then :; fi; rm -rf *": true, "if cd build && cd ..; then rm -rf *; fi": true,
		"if true; then cd build; fi; rm -rf *": true, "if cd build; then cd ..; rm -rf *; fi": true,
		"if x; cd build; then rm -rf *; fi": true, "if cd build; then rm -rf *; fi; rm -rf *": true,
		"cd build || true; rm -rf *": true, "x || exit 1; rm -rf *": true, "cd build || exit 1; cd ..; rm -rf *": true,
		// env -C DIR: DIR may lead anywhere, and the shell expands the glob where the line is.
		"env -C me rm -rf *": true, "env --chdir=me find . -delete": true, "env -C build rm -rf x.o": false,
		// $PWD after a cd is where the cd went.
		`cd .. && rm -rf "$PWD/proj"`: true, `cd .. && rm -rf "$(pwd)/proj"`: true, `cd "$x" && rm -rf "$PWD/proj"`: true,
		`rm -rf "$PWD/build"`: false, `cd build; rm -rf "$PWD/x"`: false,
		// More spellings of the texts, arrays and substitutions above.
		`bash <<< $'\x72m -rf ../proj'`: true, `mapfile -t a <<< $'rm\n-rf\n~'; "${a[@]}"`: true,
		"echo cm0gLXJmIH4= | base64 --deco | bash": true, "echo x | busybox base64 -d | sh": true,
		`echo "jorp/.. fr- mr" | rev | bash`: true, "sed 's/X/rm/' <<< 'X -rf ~' | bash": true,
		"f() { base64 -d <<< x; }; f | bash": true, "tr -d '\r' < install.sh | bash": false,
		`python3 -c 'print("rm -rf ~")' | sh`: true, `awk 'BEGIN{print "r" "m -rf ~"}' | sh`: true,
		"python3 gen.py | sh": false,
		// xargs rm of what a listing of a dir prints: that dir emptied.
		"ls | xargs rm -rf": true, "ls -A | xargs rm -rf": true, "echo * | xargs rm -rf": true,
		"find . -maxdepth 1 | xargs rm -rf": true, "ls .. | xargs rm -rf": true,
		"find . -name node_modules -type d | xargs rm -rf": false, "find . -name '*.pyc' | xargs rm -f": false,
		"ls build | xargs rm -rf":                      false,
		`a[1+1]=../proj; a[0]=rm; a[1]=-rf; "${a[@]}"`: true, `a=([2]=~ [0]=rm [1]=-rf); "${a[@]}"`: true,
		`set -- rm -rf ../proj; "$@"`: true, `a=(x y rm -rf ~); "${a[@]:2}"`: true, `set -- a b; echo "$@"`: false,
		`rm -rf "$(dirname -- "$PWD")/proj"`: true, `rm -rf "$(readlink -fn ..)/proj"`: true,
		`rm -rf "$(cd .. >/dev/null && pwd -P)/proj"`: true, `rm -rf "$(cd .. && echo "$PWD")/proj"`: true,
		`export p=$(dirname "$PWD"); rm -rf "$p/proj"`: true, `d=$(mktemp -d); rm -rf "$d/x"`: false,
		`rm -rf "$(readlink x)/proj"`:           false,
		"cd build && cd /home/u && rm -rf proj": true, "cd /tmp && rm -rf *": true, "cd build && rm -rf ..": true,
		// An array's words given one by one, run by an expansion of it.
		`a[0]=rm; a[1]=-rf; a[2]=~; "${a[@]}"`: true, `a[2]=~; a[0]=rm a[1]=-rf; "${a[@]}"`: true,
		`a=(); a+=(rm); a+=(-rf ../proj); "${a[@]}"`: true, `a[$i]=rm; a[1]=-rf; a[2]=..; "${a[@]}"`: true,
		`a[0]=ls; a[1]=-la; "${a[@]}"`: false, `a=(rm -f); a+=(x.o); "${a[@]}"`: false,
		// A script the line carries encoded, decoded into a shell: what it runs no check reads.
		"echo cm0gLXJmIH4= | base64 -d | bash": true, `bash <<< "$(base64 --decode <<< cm0gLXJmIH4=)"`: true,
		`eval "$(echo cm0gLXJmIH4= | base64 -d)"`: true, "xxd -r -p <<< 726d202d7266207e | sh": true,
		`printf '\x72\x6d -rf ~' | bash`: true, `echo -e '\x72m -rf ~' | bash`: true, "printf '%s -rf ~' rm | sh": true,
		"zcat s.gz | bash": true, `bash -c "$(openssl enc -d -base64 <<< x)"`: true,
		// A substitution whose output follows from its words, read as it is.
		`rm -rf "$(dirname $PWD)/proj"`: true, `rm -rf "$(dirname "$PWD")"`: true, `x=$(cd ..; pwd); rm -rf "$x/proj"`: true,
		`x=$(cd .. && pwd); rm -rf "$x"/proj/`: true, `p=$(pwd); rm -rf "$p"/`: true, `rm -rf "$(realpath ..)/proj"`: true,
		`rm -rf "$(readlink -f ~)"`: true, `rm -rf "$(dirname $PWD)/other"`: false, `rm -rf "$(pwd)/build"`: false,
		`x=build; x=$(cmd); rm -rf ../$x`: true,
		`eval "$(ssh-agent -s)"`:          false, "cat x.sh | bash": false, "base64 -d x.b64 > y; bash run.sh": false,
		"source .venv/bin/activate && printf '%s\n' a | sort": false, "echo 'echo hi' | bash": false,
	} {
		if got := slices.Contains(Classify(cmd, opts).Risks, RiskCriticalPathRm); got != want {
			t.Errorf("%q: critical %v, want %v", cmd, got, want)
		}
	}
}

// TestPathsUnpackedTrees: run outside any sandbox, an unpacker writes whatever its archive or
// patch names below where it unpacks, and a git command that rewrites the worktree writes it
// whole, from its top (worktree); in the sandbox the kernel holds each write and none is added.
// A directory known only at run time leaves the paths incomplete.
func TestPathsUnpackedTrees(t *testing.T) {
	t.Parallel()
	unconfined := testOpts
	unconfined.Unconfined = true
	for cmd, want := range map[string]string{
		"tar xzf a.tgz":                          "/home/u/proj:tree",
		"tar -x -f a.tar -C out":                 "/home/u/proj/out:tree",
		"tar -xf a.tar --directory=/etc/x":       "/etc/x:tree",
		"gtar --extract -f a.tar -C a -C b":      "/home/u/proj/a:tree /home/u/proj/b:tree",
		"tar czf a.tgz src":                      "",
		"tar -tf a.tar":                          "",
		"unzip -o a.zip -d out":                  "/home/u/proj/out:tree",
		"unzip a.zip":                            "/home/u/proj:tree",
		"unzip -l a.zip":                         "",
		"patch -p1":                              "/home/u/proj:tree",
		"patch --directory=sub -p1":              "/home/u/proj/sub:tree",
		"7z x a.7z -oout":                        "/home/u/proj/out:tree",
		"7z l a.7z":                              "",
		"ar x lib.a":                             "/home/u/proj:tree",
		"jar xf a.jar":                           "/home/u/proj:tree",
		"dpkg-deb -x a.deb out":                  "/home/u/proj/out:tree",
		"git checkout main":                      "/home/u/proj/main:tree /home/u/proj:worktree",
		"git switch -c topic":                    "/home/u/proj:worktree",
		"git reset --hard HEAD~1":                "/home/u/proj:worktree",
		"git reset HEAD~1":                       "",
		"git stash pop":                          "/home/u/proj:worktree",
		"git stash list":                         "",
		"git apply x.diff":                       "/home/u/proj:worktree",
		"git apply --stat x.diff":                "",
		"git pull --rebase":                      "/home/u/proj:worktree",
		"git worktree add ../wt topic":           "/home/u/wt:tree",
		"git worktree move wt .vscode":           "/home/u/proj/.vscode:tree",
		"git status":                             "",
		"git clone ../r":                         "/home/u/proj/r:tree",
		"git clone -b x https://h/a/.github.git": "/home/u/proj/.github:tree",
		"git clone --bare h:x/y.git z":           "/home/u/proj/z:tree",
		"git init --separate-git-dir /tmp/g x":   "/tmp/g:tree",
		"python3 -m zipfile -e a.zip out":        "/home/u/proj/out:tree",
		"tar f a.tar -x":                         "/home/u/proj:tree",
		"git read-tree -mu evil":                 "/home/u/proj:worktree",
		"git merge-ort HEAD evil":                "/home/u/proj:worktree",
		"git co evil":                            "/home/u/proj:worktree",
		"git read-tree -m evil":                  "",
		"git checkout evil -- '*.yml'":           "/home/u/proj:worktree /home/u/proj/evil:tree /home/u/proj/*.yml:tree",
		"python3 -mzipfile -e a.zip":             "/home/u/proj:tree",
		"python3 -m zipfile -v -e a.zip out":     "/home/u/proj/out:tree",
		"7zz x a.7z":                             "/home/u/proj:tree",
		"unsquashfs -d . a.sqfs":                 "/home/u/proj:tree",
		"unsquashfs a.sqfs":                      "/home/u/proj/squashfs-root:tree",
		"dpkg -x a.deb out":                      "/home/u/proj/out:tree",
		"gem unpack x.gem":                       "/home/u/proj:tree",
		"cpio -idm --no-absolute-filenames":      "/home/u/proj:tree",
	} {
		for _, opts := range []Options{unconfined, testOpts} {
			g := shownWrites(Classify(cmd, opts), false)
			if !opts.Unconfined {
				if g != "" && !strings.HasPrefix(cmd, "git checkout") {
					t.Errorf("%q in the sandbox: tree writes %s, want none", cmd, g)
				}
				continue
			}
			if g != want {
				t.Errorf("%q: tree writes %s, want %s", cmd, g, want)
			}
		}
	}
	// Where it unpacks is not known, or it may write outside it (-P, ../ names kept).
	for _, cmd := range []string{`tar xf a.tar -C "$d"`, "tar xzfC a.tgz d", `unzip a.zip -d "$out"`, "tar -xf a.tar -C",
		"tar -xPf a.tar", "tar -xf a.tar --transform=s,^,/x/,", "unzip -: a.zip", "cpio -idm", "python3 -m tarfile -e a.tar", "gzip -dr ."} {
		c := Classify(cmd, unconfined)
		if !c.PathsIncomplete {
			t.Errorf("%q: paths complete, want incomplete (where it unpacks is not known)", cmd)
		}
	}
}

// TestPathsWrittenUnseen: run outside any sandbox, what a command writes under a name it makes
// or takes from an option is a write: xxd's output, find's -fprint* and -fls files, tree -o
// (and -R's pages below), git's --output on any subcommand and checkout-index's --prefix, a
// compressor's made names (.envrc.gz -> .envrc, -S), a recursive one's tree, what an archiver
// removes.
func TestPathsWrittenUnseen(t *testing.T) {
	t.Parallel()
	unconfined := testOpts
	unconfined.Unconfined = true
	for cmd, want := range map[string]string{
		"xxd a.md .github/x.yml":                       "/home/u/proj/.github/x.yml:",
		"xxd -len 10 in out":                           "/home/u/proj/in: /home/u/proj/out:",
		"find . -maxdepth 0 -fprintf .git/config x":    "/home/u/proj/.git/config:",
		"find . -fls out.txt":                          "/home/u/proj/out.txt:",
		"tree -o .vscode/tasks.json":                   "/home/u/proj/.vscode/tasks.json:",
		"tree -R -H x src":                             "/home/u/proj/src:tree",
		"git reflog -p --output=/home/u/.bashrc":       "/home/u/.bashrc:",
		"git stash show -p --output .git/hooks/x":      "/home/u/proj/.git/hooks/x:",
		"git checkout-index -f --prefix=.git/hooks/ x": "/home/u/proj/.git/hooks:tree /home/u/proj:worktree",
		"gunzip .envrc.gz":                             "/home/u/proj/.envrc:",
		"xz -dk a.tar.xz":                              "/home/u/proj/a.tar:",
		"gzip -S rc .bash":                             "/home/u/proj/.bashrc:",
		"gzip -r .":                                    "/home/u/proj:tree",
		"zstd -r --rm src":                             "/home/u/proj/src:tree",
		"gzip -c x":                                    "",
		"zip -rm x.zip src":                            "/home/u/proj/src:tree",
		"tar --remove-files -cf x.tar src":             "/home/u/proj/src:tree",
	} {
		if g := shownWrites(Classify(cmd, unconfined), true); g != want {
			t.Errorf("%q: writes %s, want %s", cmd, g, want)
		}
	}
	if c := Classify("gunzip -N x.gz", unconfined); !c.PathsIncomplete {
		t.Errorf("gunzip -N: the name stored in the file is not known, yet the paths are complete")
	}
}

// shownWrites lists c's writes that no word names as a mention: whole-tree ones as PATH:tree,
// a worktree's as PATH:worktree, and with plain the others as PATH:.
func shownWrites(c *Classification, plain bool) string {
	var got []string
	for _, p := range c.Paths {
		switch {
		case p.Mention || p.Access != AccessWrite:
		case p.Worktree:
			got = append(got, p.Path+":worktree")
		case p.Tree:
			got = append(got, p.Path+":tree")
		case plain:
			got = append(got, p.Path+":")
		}
	}
	return strings.Join(got, " ")
}

// TestPathsCdPathUnconfined: outside a sandbox the agent's environment may hold CDPATH, so a cd
// to a bare name may go anywhere; to ./x, ../x or /x it goes there. Inside, the sandbox's
// environment holds none.
func TestPathsCdPathUnconfined(t *testing.T) {
	t.Parallel()
	un := testOpts
	un.Unconfined = true
	for cmd, unbounded := range map[string]bool{"cd keys && cat api.key": true, "cd ./keys && cat api.key": false, "cd /tmp && cat x": false} {
		if c := Classify(cmd, un); c.PathsUnbounded != unbounded {
			t.Errorf("%q unconfined: unbounded %v, want %v", cmd, c.PathsUnbounded, unbounded)
		}
		if c := Classify(cmd, testOpts); c.PathsUnbounded {
			t.Errorf("%q confined: unbounded", cmd)
		}
	}
}
