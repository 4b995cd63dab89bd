package difftest

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The generator turns templates into commands. In a template, phMark is the command's own
// marker name (M_<n>; the number is one byte, \x01, until numbering, so that no spelling
// splits it): every file a payload or a writing option creates is named after it,
// so a write found after a run is attributed to the command that made it. phInput is an input
// file created before the run (M_<n>.txt, two lines of text) and phScript a sed script file
// (M_<n>.sed, writing M_<n>), both named after the command too, so a change to them is
// attributed the same way. A program run by configuration the harness plants (git's
// fsmonitor, pager, external diff, textconv, editor; rg --pre) is ./hook, which writes
// $DIFFTEST_MARK_hook: the runner sets DIFFTEST_MARK to each command's marker name.
const (
	phMark   = "M_\x01"
	phInput  = phMark + ".txt"
	phScript = phMark + ".sed"
	phMagic  = phMark + ".magic"
)

// corpusSeed seeds the generator: the corpus is the same on every run.
const corpusSeed = 16

// gcase is one generated command.
type gcase struct {
	id     int
	family string
	cmd    string
	// files are created in the workspace before the run (name -> content).
	files map[string]string
}

func (c gcase) mark() string { return fmt.Sprintf("M_%d", c.id) }

// gen collects templates in order, dropping duplicates, then numbers them.
type gen struct {
	r     *rand.Rand
	seen  map[string]bool
	tmpls []struct{ family, tmpl string }
}

func (g *gen) add(family, tmpl string) {
	if g.seen[tmpl] {
		return
	}
	g.seen[tmpl] = true
	g.tmpls = append(g.tmpls, struct{ family, tmpl string }{family, tmpl})
}

// pick returns one of xs, chosen by the seeded source.
func pick[T any](g *gen, xs []T) T { return xs[g.r.IntN(len(xs))] }

// generate returns the whole corpus: the same seed, the same commands in the same order.
func generate(seed uint64) []gcase {
	g := &gen{r: rand.New(rand.NewPCG(seed, 0x5ad0)), seen: map[string]bool{}}
	for _, f := range families {
		f.fn(g, f.name)
	}
	out := make([]gcase, 0, len(g.tmpls))
	for i, t := range g.tmpls {
		c := gcase{id: i + 1, family: t.family}
		m := c.mark()
		if strings.Contains(t.tmpl, phInput) {
			c.files = map[string]string{m + ".txt": "hello\nworld\n"}
		}
		if strings.Contains(t.tmpl, phScript) {
			if c.files == nil {
				c.files = map[string]string{}
			}
			c.files[m+".sed"] = "w " + m + "\n"
		}
		if strings.Contains(t.tmpl, phMagic) {
			if c.files == nil {
				c.files = map[string]string{}
			}
			c.files[m+".magic"] = "0\tstring\thello\thello text\n"
		}
		c.cmd = strings.ReplaceAll(t.tmpl, "\x01", strconv.Itoa(c.id))
		out = append(out, c)
	}
	return out
}

var families = []struct {
	name string
	fn   func(g *gen, fam string)
}{
	{"table", genTable},
	{"opt-sort-output", genSort},
	{"opt-sort-tempdir", genSortTemp},
	{"opt-uniq-operand", genUniq},
	{"opt-find-write", genFindWrite},
	{"opt-find-exec", genFindExec},
	{"opt-rg-exec", genRg},
	{"opt-file-compile", genFile},
	{"opt-wrapper", genWrappers},
	{"sed-script", genSedScript},
	{"sed-flags", genSedFlags},
	{"git-output", genGitOutput},
	{"git-other-repo", genGitOtherRepo},
	{"git-config-override", genGitOverride},
	{"git-config-cmd", genGitConfig},
	{"git-listing", genGitListing},
	{"git-misc", genGitMisc},
	{"name-subscript", genNames},
	{"indirect-expansion", genIndirect},
	{"arith-quoted", genArith},
	{"dquote-param", genDquoteParam},
	{"brace-quoted", genBrace},
	{"func-shadow", genFuncs},
	{"mapfile-callback", genMapfile},
	{"line-structure", genLines},
	{"heredoc", genHeredoc},
	{"redirect", genRedirects},
	{"substitution", genSubst},
	{"zsh-glob", genZsh},
	{"sh-quote", genSh},
}

// ---- spellings -----------------------------------------------------------------

// fill puts a and b where a template says %[1]s and %[2]s.
func fill(t, a, b string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "%[1]s", a), "%[2]s", b)
}

// spellings returns the ways bash lets one write the word w (a literal with no quotes,
// spaces or backslashes): quoting all or part of it, backslashes, empty quotes, $'…'
// (with escapes for a leading dash), $"…", a line continuation inside it, a one-word brace.
func spellings(w string) []string {
	out := []string{w, "'" + w + "'", `"` + w + `"`, `\` + w, "$'" + w + "'", `$"` + w + `"`}
	if len(w) > 1 {
		k := len(w) / 2
		out = append(out,
			"'"+w[:1]+"'"+w[1:],
			`"`+w[:k]+`"`+w[k:],
			w[:1]+`\`+w[1:],
			w[:1]+"''"+w[1:],
			w[:k]+`""`+w[k:],
			w[:k]+"\\\n"+w[k:],
			w[:k]+"$''"+w[k:],
			"{"+w+",}", "{,"+w+"}", // the empty alternative is dropped: still one word
		)
	}
	if strings.HasPrefix(w, "-") {
		out = append(out, `$'\x2d`+w[1:]+"'", `$'\055`+w[1:]+"'", `$'\u002d`+w[1:]+"'")
	}
	if i := strings.IndexByte(w, '='); i > 0 {
		out = append(out, w[:i]+`"="`+w[i+1:], w[:i+1]+"'"+w[i+1:]+"'", "'"+w[:i]+"'"+w[i:])
	}
	return out
}

// someSpellings is a seeded sample of n spellings of w, the plain one always first.
func someSpellings(g *gen, w string, n int) []string {
	all := spellings(w)
	if n >= len(all) {
		return all
	}
	out := []string{all[0]}
	perm := g.r.Perm(len(all) - 1)
	for _, i := range perm[:n-1] {
		out = append(out, all[i+1])
	}
	return out
}

// cmdWord is a seeded spelling of a command name: as is, quoted, by path, behind a
// wrapper the classifier unwraps.
func cmdWord(g *gen, name string) string {
	forms := []string{name, name, name, "'" + name + "'", name[:1] + "'" + name[1:] + "'", `\` + name,
		"/usr/bin/" + name, "command " + name, "env " + name, "nice " + name, "timeout 9 " + name,
		"stdbuf -o0 " + name, "env LC_ALL=C " + name, "LC_ALL=C " + name, "time " + name,
		"command -p " + name, "nice -n 1 -- " + name, "timeout -s KILL 9 " + name}
	if len(name) > 2 {
		forms = append(forms, name[:2]+"\\\n"+name[2:], "$'"+name+"'")
	}
	return pick(g, forms)
}

// inContext puts a command somewhere in a line: alone, in a list, a pipe, a group, a
// substitution, a control structure.
func inContext(g *gen, c string) string {
	forms := []string{"%s", "%s", "%s", "ls && %s", "%s; ls", "true | %s", "%s | cat", "( %s )",
		"{ %s; }", `echo "$(%s)"`, "if :; then %s; fi", "for i in 1; do %s; done", "! %s",
		"case a in a) %s;; esac", "x=$(%s)", "while %s; do break; done", "%s || :", "echo `%s`"}
	f := pick(g, forms)
	if f == "echo `%s`" && strings.ContainsAny(c, "`\\") {
		f = "%s"
	}
	return fmt.Sprintf(f, c)
}

// optForms spells an option that takes a file argument: short letter s (may be ""),
// long name l, the argument a, with bundling (a harmless short flag b in front) and
// abbreviations of the long name.
func optForms(s, b, l, a string) [][]string {
	var out [][]string
	if s != "" {
		out = append(out, []string{"-" + s, a}, []string{"-" + s + a})
		if b != "" {
			out = append(out, []string{"-" + b + s, a}, []string{"-" + b + s + a})
		}
	}
	if l != "" {
		out = append(out, []string{"--" + l + "=" + a}, []string{"--" + l, a})
		for k := 1; k < len(l); k += 2 {
			out = append(out, []string{"--" + l[:k] + "=" + a})
		}
	}
	return out
}

// spellArgs spells the first word of an option (the one the classifier must recognise)
// in n seeded ways, and joins in the argument; one variant also makes the option and its
// argument one brace expansion.
func spellArgs(g *gen, words []string, n int) []string {
	var out []string
	for _, sp := range someSpellings(g, words[0], n) {
		out = append(out, strings.Join(append([]string{sp}, words[1:]...), " "))
	}
	if len(words) == 2 {
		out = append(out, "{"+words[0]+","+words[1]+"}", `{"`+words[0]+`",`+words[1]+"}")
	}
	return out
}

// ---- the read-only table ------------------------------------------------------------

// tableUses are ordinary uses of every command of the classifier's read-only table
// (commands.go), with options it lets through: they must not write either (a temporary
// file, an index refresh, a lock).
var tableUses = []string{
	"ls -la", "ls -R sub", "ls --color=never -1 a.txt b.txt", "ls -d .", "ls --full-time a.txt", "cat a.txt", "cat -n a.txt b.txt",
	"cat -A a.txt", "head -n1 a.txt", "head -c 3 a.txt", "head --lines=1 a.txt", "wc -l a.txt", "wc -c a.txt b.txt",
	"stat a.txt", "stat -c %s a.txt", "which ls", "which -a git", "du -sh .", "du -a sub", "diff a.txt b.txt",
	"diff -u a.txt b.txt", "diff -r sub sub", "tac a.txt", "nl a.txt", "cut -c1 a.txt", "tr a b < a.txt",
	"basename /a/b", "dirname /a/b", "realpath a.txt", "readlink -f a.txt", "grep hello a.txt", "grep -r hello .",
	"grep -c o a.txt", "grep -e hello -e world a.txt", "grep --include=*.txt -rn hello .", "egrep 'h|w' a.txt",
	"fgrep hello a.txt", "id", "id -u", "whoami", "uname -a", "printenv HOME", "seq 3", "md5sum a.txt", "sha1sum a.txt",
	"sha256sum a.txt b.txt", "sha512sum a.txt", "b2sum a.txt", "cksum a.txt", "cmp a.txt b.txt", "comm a.txt b.txt",
	"paste a.txt b.txt", "fold -w2 a.txt", "expand a.txt", "unexpand a.txt", "od -c a.txt", "hexdump -C a.txt",
	"strings a.txt", "type ls", "column -t a.txt", "rev a.txt", "df .", "free", "uptime", "nproc", "arch", "locale",
	"tty", "groups", "ps", "jq . <<< '{}'", "jq -n 1", "join a.txt b.txt", "echo hi", "printf '%s\\n' x", "true",
	"false", ":", "test -e a.txt", "[ -f a.txt ]", "sleep 0", "cd sub", "pushd sub", "dirs", "read x < a.txt",
	"mapfile x < a.txt", "readarray -t x < a.txt", "getopts a x -a", "printf -v x %s 1", "test -v x", "tail -n1 a.txt",
	"tail -c 2 a.txt", "file a.txt", "file -b a.txt", "rg hello", "rg -n hello a.txt", "rg --files", "find . -name '*.txt'",
	"find . -type d", "find sub -newer a.txt", "sort a.txt", "sort -r -u a.txt", "sort -k1,1 -n big.txt",
	"sort -S 1 big.txt", "sed -n 1p a.txt", "sed s/hello/bye/ a.txt", "sed -n '/o/p' a.txt", "date +%s", "date -u",
	"date -d @0", "uniq a.txt", "uniq -c a.txt", "hostname", "hostname -s", "git status", "git status -s", "git log",
	"git log --oneline", "git log -p -1", "git diff", "git diff HEAD~1", "git diff --stat", "git show HEAD:a.txt",
	"git branch", "git branch -a", "git tag", "git tag -l", "git rev-parse HEAD", "git ls-files", "git blame a.txt",
	"git grep hello", "git shortlog -s HEAD", "git rev-list HEAD", "git describe --tags", "git stash list",
	"git reflog", "git config --get core.bare", "git config -l", "git remote", "git cat-file -p HEAD",
	"git diff-files", "git diff-index HEAD", "git name-rev HEAD", "git for-each-ref", "git count-objects",
	"git merge-base HEAD side", "git cherry side", "git show-branch", "git whatchanged -1", "git var -l",
	"git ls-tree -r HEAD", "git check-ignore x", "git --no-pager log -1", "git -P log -1", "git diff --output-indicator-new=+",
}

func genTable(g *gen, fam string) {
	for _, u := range tableUses {
		g.add(fam, u)
		for i := 0; i < 2; i++ {
			name, rest, _ := strings.Cut(u, " ")
			if len(name) < 2 || !strings.ContainsAny(name[:1], "abcdefghijklmnopqrstuvwxyz") {
				g.add(fam, inContext(g, u))
				continue
			}
			words := strings.Fields(rest)
			if len(words) > 0 && strings.HasPrefix(words[0], "-") && !strings.ContainsAny(words[0], "'%*|") {
				words[0] = pick(g, spellings(words[0]))
			}
			g.add(fam, inContext(g, strings.TrimSpace(cmdWord(g, name)+" "+strings.Join(words, " "))))
		}
	}
}

// genSortTemp: sort's temporary files, which -T puts in the workspace (-S 1 makes sort
// spill big.txt to them).
func genSortTemp(g *gen, fam string) {
	for _, f := range [][]string{{"-T", "."}, {"-T."}, {"--temporary-directory=."}, {"--temporary-directory", "sub"}, {"-T", "sub"},
		{"--te=."}, {"-rT", "."}} {
		for _, sp := range spellArgs(g, f, 4) {
			g.add(fam, "sort -S 1 "+sp+" big.txt")
		}
	}
}

// ---- option families ---------------------------------------------------------------

func genSort(g *gen, fam string) {
	for _, f := range optForms("o", "r", "output", phMark) {
		for _, o := range spellArgs(g, f, 8) {
			g.add(fam, inContext(g, cmdWord(g, "sort")+" "+o+" a.txt"))
			g.add(fam, inContext(g, cmdWord(g, "sort")+" a.txt "+o))
		}
	}
	for _, o := range spellArgs(g, []string{"--compress-program=./hook"}, 10) {
		g.add(fam, "sort -S 1 -T . "+o+" big.txt")
	}
	g.add(fam, "sort -o"+phMark+" -- a.txt")
	g.add(fam, "sort -mo "+phMark+" a.txt")
	g.add(fam, "sort -uo "+phMark+" a.txt b.txt")
}

func genUniq(g *gen, fam string) {
	for _, sp := range someSpellings(g, phMark, 10) {
		g.add(fam, inContext(g, cmdWord(g, "uniq")+" a.txt "+sp))
		g.add(fam, cmdWord(g, "uniq")+" -c a.txt "+sp)
		g.add(fam, "uniq -- a.txt "+sp)
		g.add(fam, "uniq -f 1 a.txt "+sp)
		g.add(fam, "uniq a.txt -u "+sp)
		g.add(fam, "uniq --skip-fields 1 a.txt "+sp)
		g.add(fam, "uniq -s1 a.txt "+sp)
		g.add(fam, "uniq -w 2 a.txt "+sp)
	}
	g.add(fam, "uniq {a.txt,"+phMark+"}")
	g.add(fam, "uniq a.txt{,."+phMark+"}")
	g.add(fam, "uniq -D -- - "+phMark+" < a.txt")
}

func genFindWrite(g *gen, fam string) {
	for _, act := range []string{"-fprint", "-fprint0", "-fls"} {
		for _, sp := range spellArgs(g, []string{act, phMark}, 12) {
			g.add(fam, inContext(g, cmdWord(g, "find")+" . -maxdepth 0 "+sp))
			g.add(fam, "find . -name nothing -o -maxdepth 0 "+sp)
		}
	}
	for _, sp := range spellArgs(g, []string{"-fprintf", phMark, "%p"}, 12) {
		g.add(fam, inContext(g, cmdWord(g, "find")+" . -maxdepth 0 "+sp))
	}
	for _, sp := range someSpellings(g, "-delete", 12) {
		g.add(fam, "find "+phInput+" "+sp)
	}
}

func genFindExec(g *gen, fam string) {
	for _, act := range []string{"-exec", "-execdir", "-ok", "-okdir"} {
		for _, sp := range someSpellings(g, act, 10) {
			for _, end := range []string{`\;`, `';'`, `";"`, "+", `{} +`, `{} \;`} {
				g.add(fam, inContext(g, cmdWord(g, "find")+" . -maxdepth 0 "+sp+" touch "+phMark+" "+end))
			}
		}
		g.add(fam, "find . -maxdepth 0 {"+act+",touch,"+phMark+`,\;}`)
		g.add(fam, "find . -maxdepth 0 {'"+act+"',touch,"+phMark+`,';'}`)
	}
	g.add(fam, "find -D exec . -maxdepth 0 -exec touch "+phMark+` \;`)
	g.add(fam, "find . -maxdepth 0 -and -exec touch "+phMark+` \;`)
	g.add(fam, "find . -maxdepth 0 -newer a.txt -o -exec touch "+phMark+` \;`)
}

func genRg(g *gen, fam string) {
	for _, f := range [][]string{{"--pre=./hook"}, {"--pre", "./hook"}, {"--pr=./hook"}, {"--pre-glob=*", "--pre=./hook"},
		{"--hostname-bin=./hook", "--hyperlink-format={host}"}, {"--hostname-bin", "./hook", "--hyperlink-format=file://{host}{path}"}} {
		for _, sp := range spellArgs(g, f, 8) {
			g.add(fam, inContext(g, cmdWord(g, "rg")+" "+sp+" hello a.txt"))
			g.add(fam, "rg hello "+sp+" a.txt")
		}
	}
	g.add(fam, "rg {--pre,./hook} hello a.txt")
	g.add(fam, "rg -z hello a.gz")
	g.add(fam, "rg --search-zip hello a.gz")
}

func genFile(g *gen, fam string) {
	for _, f := range [][]string{{"-C", "-m", phMagic}, {"-Cm", phMagic}, {"--compile", "--magic-file", phMagic},
		{"--compile", "-m", phMagic}, {"-C", "--magic-file=" + phMagic}} {
		for _, sp := range spellArgs(g, f, 6) {
			g.add(fam, inContext(g, cmdWord(g, "file")+" "+sp))
		}
	}
}

// genWrappers puts writers behind the wrappers the classifier unwraps, with their own
// options (env -S runs a string, env -C changes directory, time -o writes).
func genWrappers(g *gen, fam string) {
	inner := []string{"sort -o " + phMark + " a.txt", "touch " + phMark, "uniq a.txt " + phMark,
		"find . -maxdepth 0 -fprint " + phMark, "sed -n w" + phMark + " a.txt"}
	wraps := []string{"env", "env -i", "env -u X", "env -C .", "env --chdir=.", "env -", "env -0", "nice", "nice -n 5",
		"nice -5", "nice --adjustment=3", "timeout 5", "timeout -k 1 5", "timeout --foreground 5", "timeout -s 9 5",
		"stdbuf -o0", "stdbuf -oL -e0", "stdbuf --output=L", "command", "command -p", "builtin", "nohup", "time", "time -p",
		"nice timeout 5 env", "env nice stdbuf -o0 timeout 5", "noglob"}
	for _, w := range wraps {
		for _, in := range inner {
			g.add(fam, inContext(g, w+" "+in))
		}
	}
	for _, sp := range spellArgs(g, []string{"-S", "touch " + phMark}, 8) {
		g.add(fam, "env "+strings.Replace(sp, "touch "+phMark, "'touch "+phMark+"'", 1))
	}
	for _, f := range []string{"env -S'touch " + phMark + "'", "env --split-string='touch " + phMark + "'",
		"env --split-s 'touch " + phMark + "'", "env -vS 'touch " + phMark + "'", "env -iS'touch " + phMark + "'",
		`env -S"touch ` + phMark + `"`, "env -C . -S 'touch " + phMark + "'", "time -o " + phMark + " ls",
		`\time -o ` + phMark + " ls", "command time -o " + phMark + " ls", "env time -o " + phMark + " ls",
		"time -a -o " + phMark + " ls", "timeout 5 -o " + phMark, "nohup ls", "nohup -- ls",
		"stdbuf -o0 sort -o " + phMark + " a.txt", "command -v ls > " + phMark, "command -V ls"} {
		g.add(fam, f)
	}
}

// ---- sed ---------------------------------------------------------------------------------

func genSedScript(g *gen, fam string) {
	m := phMark
	scripts := []string{
		"w " + m, "w" + m, "1w " + m, "$w " + m, "/hello/w " + m, "1,2w " + m, "0~1w " + m, "1!w " + m,
		"1 ! w " + m, "W " + m, "1W" + m, "s/x/y/w " + m, "s/hello/bye/w" + m, "s/hello/bye/gw " + m,
		"s|hello|bye|w " + m, "s,a,b,pw " + m, "s/a/b/2w " + m, "s/a/b/Iw " + m, "s/a/b/mw " + m,
		":x w " + m, ":x;w " + m, ":a\nw " + m, "b end; w " + m + "; :end", "t x; w " + m + "; :x", "T;w " + m,
		"{w " + m + "\n}", "{w " + m + "}", "1{w " + m + "\n}", "1{;w " + m + "\n}", "{p;w " + m + "\n}",
		"p;w " + m, "p\nw " + m, "#n\nw " + m, "# c\nw " + m, "y/a/b/;w " + m, "n;w " + m, "$!N;w " + m,
		"e touch " + m, "1e touch " + m, "$e touch " + m, "e\ntouch", "s/.*/touch " + m + "/e", "s/hello/touch " + m + "/e",
		"s/x/y/;e touch " + m, ":x e touch " + m, "b;e touch " + m, "1!G;h;$!d;w " + m,
		"\\,hello,w " + m, "/x/I,+1w " + m, "2,~4w " + m, "l 5;w " + m, "q;w " + m, "=;w " + m, "a\\\nx\nw " + m,
		"i x\nw " + m, "c\\\nx\nw " + m, "z;w " + m, "F;w " + m, "r a.txt", "R a.txt", "s/a/b/ ; w " + m,
		"s/a/\\n/w " + m, "s/[/]/x/w " + m, "s/a/b/;:l w " + m, "v;w " + m, "1v 4.2\nw " + m,
	}
	for _, s := range scripts {
		q := "'" + s + "'"
		g.add(fam, inContext(g, cmdWord(g, "sed")+" "+q+" a.txt"))
		g.add(fam, pick(g, []string{"sed -n ", "sed -e ", "sed -ne ", "sed --expression=", "sed -n --expression ", "sed -s -e ", "sed -E -n -e ", "sed -z -e ", "sed -u "})+q+" a.txt")
		g.add(fam, "sed -e p -e "+q+" a.txt")
		g.add(fam, "sed "+`$'`+strings.ReplaceAll(s, "\n", `\n`)+"' a.txt")
	}
}

func genSedFlags(g *gen, fam string) {
	for _, f := range [][]string{{"-i"}, {"-i.bak"}, {"-i" + "." + phMark}, {"-ni"}, {"-si"}, {"-Ei"}, {"--in-place"},
		{"--in-place=.b"}, {"--in-pl"}, {"--i"}, {"-i", "-e", "s/hello/bye/"}, {"-e", "s/hello/bye/", "-i"}} {
		for _, sp := range spellArgs(g, f, 8) {
			script := " s/hello/bye/"
			if len(f) > 1 {
				script = ""
			}
			g.add(fam, inContext(g, cmdWord(g, "sed")+" "+sp+script+" "+phInput))
		}
	}
	for _, f := range [][]string{{"-f", phScript}, {"-f" + phScript}, {"--file=" + phScript}, {"--file", phScript},
		{"--fi=" + phScript}, {"-nf", phScript}, {"-n", "-f", phScript}} {
		for _, sp := range spellArgs(g, f, 8) {
			g.add(fam, inContext(g, cmdWord(g, "sed")+" "+sp+" a.txt"))
		}
	}
	g.add(fam, "sed s/hello/bye/ -i "+phInput)
	g.add(fam, "sed -- -i "+phInput)
	g.add(fam, "sed -n p {-i,"+phInput+"}")
	g.add(fam, "sed -l 5 -i s/a/b/ "+phInput)
	g.add(fam, "sed --line-length=5 -i s/a/b/ "+phInput)
	g.add(fam, "sed -s -n -E -z -u -i s/a/b/ "+phInput)
}

// ---- git -------------------------------------------------------------------------------

var gitHistory = []string{"diff", "diff HEAD", "diff --cached", "log", "log -p", "show", "show HEAD", "diff-tree HEAD",
	"diff-tree -p HEAD", "diff-files", "diff-index HEAD", "whatchanged", "rev-list HEAD", "shortlog HEAD", "blame a.txt",
	"annotate a.txt", "reflog", "reflog show", "stash list", "stash show", "range-diff HEAD~1..HEAD HEAD~1..HEAD",
	"log --all", "log --format=%H", "cherry", "show-branch", "format-patch -1", "grep hello", "rev-list --all",
	"shortlog -s HEAD", "log --oneline -1", "describe --always", "name-rev HEAD"}

func genGitOutput(g *gen, fam string) {
	out := [][]string{{"--output=" + phMark}, {"--output", phMark}, {"--out=" + phMark}, {"--outp=" + phMark},
		{"--output=./" + phMark}, {"--o=" + phMark}}
	for _, sub := range gitHistory {
		for _, o := range out {
			for _, sp := range spellArgs(g, o, 3) {
				g.add(fam, inContext(g, cmdWord(g, "git")+" "+sub+" "+sp))
			}
		}
		g.add(fam, "git "+sub+" --ext-diff")
		g.add(fam, "git "+sub+" --textconv")
		g.add(fam, "git --no-pager "+sub+" --output="+phMark)
		g.add(fam, "git "+sub+" -- --output="+phMark)
	}
	for _, f := range []string{"git stash show -p --output=" + phMark, "git log -1 --output " + phMark + " --",
		"git stash list --output=" + phMark, "git reflog --output=" + phMark + " HEAD", "git reflog show --output=" + phMark,
		"git reflog exists HEAD --output=" + phMark, "git reflog -n1 --output=" + phMark, "git log -- a.txt --output=" + phMark,
		"git log --output-indicator-new=x --output=" + phMark, "git diff --output-indicator-new=x",
		"git format-patch -o " + phMark + " -1", "git format-patch --stdout -1 > /dev/null",
		"git {log,--output=" + phMark + "}", "git log {--output,=}" + phMark, "git log --{output,}=" + phMark} {
		g.add(fam, f)
	}
}

// genGitOtherRepo points git at evil/, a repository inside the workspace whose config runs
// ./hook as fsmonitor, pager, external diff, textconv and editor.
func genGitOtherRepo(g *gen, fam string) {
	subs := []string{"status", "diff", "log -p", "show", "ls-files", "diff HEAD", "log", "blame t.txt", "grep hello",
		"cat-file --textconv HEAD:t.txt", "rev-parse HEAD", "describe --dirty --always", "stash list", "branch", "x", "diff --stat"}
	reach := []string{"-C evil", "-Cevil", "-C ./evil", "-C evil/sub", "--git-dir=evil/.git", "--git-dir evil/.git",
		"--work-tree=evil --git-dir=evil/.git", "--work-tree=evil", "-C evil -C .", "--git-dir=evil/.git --work-tree=.",
		"{-C,evil}", "-C 'evil'", `-C "ev"il`, `-\C evil`}
	for _, sub := range subs {
		for _, r := range reach {
			g.add(fam, inContext(g, "git "+r+" "+sub))
		}
		for _, pre := range []string{"cd evil && git ", "cd evil; git ", "cd evil/sub && git ", "pushd evil >/dev/null; git ",
			"cd ./evil || exit; git ", "cd -P evil; git ", "(cd evil; git ", "cd evil; cd sub; git ", "CDPATH=. cd evil; git "} {
			c := pre + sub
			if strings.HasPrefix(pre, "(") {
				c += ")"
			}
			g.add(fam, c)
		}
		g.add(fam, "GIT_DIR=evil/.git git "+sub)
		g.add(fam, "env GIT_DIR=evil/.git git "+sub)
	}
}

func genGitOverride(g *gen, fam string) {
	cfgs := []string{"core.pager=./hook", "alias.x=!./hook", "core.fsmonitor=./hook", "diff.external=./hook",
		"core.editor=./hook", "core.hooksPath=x"}
	for _, c := range cfgs {
		for _, f := range [][]string{{"-c", c}, {"-c" + c}, {"--config-env=" + strings.Split(c, "=")[0] + "=DIFFTEST_HOOK"}} {
			for _, sp := range spellArgs(g, f, 6) {
				for _, sub := range []string{"-p log -1", "x", "status", "diff", "log -1", "-p status", "--paginate log -1"} {
					if g.r.IntN(3) == 0 {
						g.add(fam, inContext(g, "git "+sp+" "+sub))
					}
				}
			}
		}
	}
	for _, sp := range spellArgs(g, []string{"-p"}, 12) {
		g.add(fam, "git "+sp+" log -1")
		g.add(fam, "git --no-pager "+sp+" status")
	}
	for _, sp := range spellArgs(g, []string{"--paginate"}, 8) {
		g.add(fam, "git "+sp+" log -1")
	}
	g.add(fam, "git --exec-path=. status")
	g.add(fam, "git --namespace=x log -1")
	g.add(fam, "git --super-prefix=x/ ls-files")
	g.add(fam, "git {-p,log} -1")
	g.add(fam, "git -P -p log -1")
	g.add(fam, "git var GIT_PAGER")
	g.add(fam, "git var GIT_EDITOR")
}

// genGitConfig writes to a per-command file (-f M_<n>) or the repository's own config.
func genGitConfig(g *gen, fam string) {
	file := []string{"-f " + phMark, "--file=" + phMark, "--file " + phMark, "-f" + phMark, ""}
	acts := []string{"", "--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list", "--add", "--replace-all",
		"--unset", "--unset-all", "set", "unset", "--rename-section", "--remove-section", "--edit", "-e", "--get-urlmatch"}
	ops := []string{"a.b", "a.b v", "a.b v w", "a.b c.d", "", "a.b --get", "a.b v --get", "a.b v --get-all",
		"a.b v --list", "a.b --get v", "a.b v -l", "--get a.b v --add", "a.b v --global", "a.b v --local",
		"a.b v --type=bool", "a.b v --bool", "a.b --get-regexp v", "a.b --default=x v", "--get a.b --unset",
		"a.b v --no-includes"}
	for _, f := range file {
		for _, a := range acts {
			for _, o := range ops {
				if g.r.IntN(4) != 0 {
					continue
				}
				order := pick(g, [][]string{{f, a, o}, {a, f, o}, {a, o, f}, {o, a, f}, {o, f, a}})
				g.add(fam, "git config "+strings.Join(strings.Fields(strings.Join(order, " ")), " "))
			}
		}
	}
	for _, c := range []string{"git config a.b v --get -f " + phMark, "git config --get a.b v -f " + phMark,
		"git config -f " + phMark + " a.b v --get", "git config -f " + phMark + " --get a.b", "git config --global a.b v --get",
		"git config --file=" + phMark + " a.b \"\" --get", "git config get -f " + phMark + " a.b",
		"git config {-f," + phMark + "} a.b v", "git config -f " + phMark + " a.b v --type bool --get"} {
		g.add(fam, c)
	}
}

// genGitListing names M_<n> to git branch and tag: a created ref is .git/refs/…/M_<n>.
func genGitListing(g *gen, fam string) {
	flags := []string{"", "-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "--show-current", "--color",
		"--no-color", "--column", "--no-column", "-i", "--ignore-case", "--abbrev=7", "--no-abbrev", "-q", "--quiet",
		"--omit-empty", "-l", "--list", "--contains HEAD", "--merged", "--sort=refname", "--sort refname",
		"--format=%(refname)", "--format %(refname)", "-n", "-n3", "--points-at HEAD", "--no-contains HEAD", "--abbrev", "-lq"}
	for _, sub := range []string{"branch", "tag"} {
		for _, f := range flags {
			g.add(fam, strings.TrimSpace("git "+sub+" "+f)+" "+phMark)
			g.add(fam, "git "+sub+" "+phMark+" "+f)
			if g.r.IntN(2) == 0 {
				g.add(fam, "git "+sub+" "+pick(g, flags)+" "+f+" "+phMark+" HEAD")
			}
		}
	}
}

func genGitMisc(g *gen, fam string) {
	for _, c := range []string{
		"git grep -O./hook hello", "git grep -O ./hook hello", "git grep --open-files-in-pager=./hook hello",
		"git grep --open-files-in-pager hello", "git grep -O hello", "git grep --ext-grep hello", "git grep --textconv hello",
		"git grep -nO./hook hello", "git grep -iO./hook hello", "git cat-file --textconv HEAD:a.txt", "git cat-file --filters HEAD:a.txt",
		"git blame --textconv a.txt", "git describe --dirty", "git describe --broken", "git status --porcelain", "git status -uall",
		"git status --ignored", "git remote -v", "git remote get-url origin", "git remote show", "git remote add x y",
		"git remote update", "git worktree list", "git worktree add " + phMark, "git stash", "git stash push", "git stash list -p",
		"git reflog expire --all", "git reflog delete HEAD@{0}", "git reflog -- expire", "git rev-parse --git-path x",
		"git ls-files -o", "git ls-tree HEAD", "git check-ignore -v a.txt", "git check-attr -a a.txt", "git count-objects -v",
		"git for-each-ref --format='%(refname)'", "git merge-base HEAD HEAD", "git version --build-options",
		"git show-ref", "git status --no-optional-locks", "git --no-optional-locks status", "git update-index --refresh",
		"git gc --auto", "git notes add -m x", "git tag -a " + phMark + " -m x", "git branch -m " + phMark,
		"git branch -c " + phMark, "git branch --set-upstream-to=x", "git checkout -b " + phMark, "git switch -c " + phMark,
		"git log --output-directory=" + phMark, "git diff --no-index a.txt b.txt --output=" + phMark,
		"git diff --no-index a.txt b.txt > " + phMark, "git log -g", "git help -a", "git log --follow a.txt",
	} {
		g.add(fam, c)
	}
}

// ---- names with subscripts -----------------------------------------------------------

// payloads are commands a subscript or an evaluated string runs; each creates M_<n>.
var payloads = []string{"touch " + phMark, "id>" + phMark, ": > " + phMark, "echo>" + phMark, "printf x >" + phMark}

// subscriptNames spells a variable name whose subscript runs p.
func subscriptNames(g *gen, p string) []string {
	bq := strings.ReplaceAll(p, ">", `\>`)
	bq = strings.ReplaceAll(bq, " ", `\ `)
	return []string{
		"'a[$(" + p + ")]'", `"a[\$(` + p + `)]"`, `a\[\$\(` + bq + `\)\]`, "$'a[$(" + p + ")]'",
		"'a['\"\\$(" + p + ")\"']'", "'a[`" + p + "`]'", "'a[ $(" + p + ") ]'", "'a[0+$(" + p + ")]'",
		"'a[b[$(" + p + ")]]'", `a["\$(` + p + `)"]`, "a['$(" + p + ")']", "'x[$(" + p + ")]'",
	}
}

func genNames(g *gen, fam string) {
	tmpl := []string{
		"printf -v %s %%s 1", "printf -v%s %%s 1", "printf -v %s -- x", "builtin printf -v %s x", "command printf -v %s x",
		"read %s <<< 1", "read -r %s <<< 1", "read -r x %s <<< '1 2'", "read -a %s <<< 1", "read -d '' %s < a.txt",
		"read -n1 %s < a.txt", "read -rs %s < a.txt", "read %s < a.txt", "echo 1 | read %s", "read -t 1 %s <<< 1",
		"test -v %s", "[ -v %s ]", "[[ -v %s ]]", "test ! -v %s", "[ -v x -o -v %s ]", "[ -R %s ]", "test -R %s",
		"declare %s", "declare -p %s", "typeset %s", "local %s", "export %s", "readonly %s", "declare -n r=%s; echo $r",
		"declare %s=1", "unset %s", "unset -v %s", "mapfile %s < a.txt", "mapfile -t %s < a.txt", "readarray %s < a.txt",
		"getopts a %s -a", "getopts a: %s -a x", "let %s", "let %s=1", "let 'x=1' %s", "printf -v x %%s 1 && printf -v %s x",
		"declare -a %s", "declare -A %s", "declare -i %s", "wait -p %s", "read -u 0 %s <<< 1", "read -p x %s <<< 1",
		"printf -v %s %%(%%s)T 0", "command -v %s", "type %s", "echo | { read %s; }",
	}
	for _, t := range tmpl {
		for _, p := range payloads {
			if g.r.IntN(2) == 0 && p != payloads[0] {
				continue
			}
			for _, n := range subscriptNames(g, p) {
				if p != payloads[0] && g.r.IntN(3) != 0 {
					continue
				}
				g.add(fam, inContext(g, fmt.Sprintf(t, n)))
			}
		}
	}
}

func genIndirect(g *gen, fam string) {
	for _, p := range payloads {
		for _, set := range []string{"x='a[$(" + p + ")]'", `x="a[\$(` + p + `)]"`, "printf -v x %s 'a[$(" + p + ")]'",
			"read -r x <<< 'a[$(" + p + ")]'", "x=a\\[\\$\\(" + strings.ReplaceAll(strings.ReplaceAll(p, " ", `\ `), ">", `\>`) + "\\)\\]"} {
			for _, use := range []string{"echo ${!x}", ": ${!x}", `echo "${!x}"`, "echo ${!x:-}", "echo ${!x#a}", "echo ${#x}",
				"echo ${!x@Q}", "declare -n r=$x; echo $r", "echo ${!x[@]}", "echo ${!x/a/b}"} {
				g.add(fam, inContext(g, set+"; "+use))
			}
		}
		for _, set := range []string{"x='$(" + p + ")'", `x="\$(` + p + `)"`, "x='`" + p + "`'", "printf -v x %s '$(" + p + ")'",
			"read -r x <<< '$(" + p + ")'", "mapfile -t x <<< '$(" + p + ")'"} {
			for _, use := range []string{"echo ${x@P}", ": ${x@P}", `echo "${x@P}"`, "printf %s ${x@P}", "echo ${x[0]@P}",
				"echo ${x[@]@P}", "echo ${x@E}", "echo ${x@A}", "y=${x@P}", "echo ${x:-a}${x@P}"} {
				g.add(fam, inContext(g, set+"; "+use))
			}
		}
	}
}

// ---- arithmetic on quoted text --------------------------------------------------------

func genArith(g *gen, fam string) {
	for _, p := range payloads {
		sub := "a[$(" + p + ")]"
		for _, n := range subscriptNames(g, p)[:6] {
			for _, t := range []string{"[[ %s -eq 0 ]]", "[[ 0 -lt %s ]]", "[[ %s -ne 1 ]]", "[[ %s -gt 0 || 1 -eq 1 ]]",
				"[[ ! %s -le 0 ]]", "test %s -eq 0", "[ %s -eq 0 ]", "[[ 1 -eq 1 && %s -ge 0 ]]"} {
				g.add(fam, inContext(g, fmt.Sprintf(t, n)))
			}
		}
		for _, set := range []string{": '" + sub + "'", "echo '" + sub + "'", "ls '" + sub + "'", "test -n '" + sub + "'",
			"true '" + sub + "'", "printf %s '" + sub + "'", "cat '" + sub + "'"} {
			for _, use := range []string{"(( $_ ))", "(( _ ))", "[[ $_ -eq 0 ]]", "echo $(( $_ ))", "echo $((_))", "[[ _ -eq 0 ]]",
				"let _", ": ${x:_}", "echo ${a[_]}", "for ((i=_;0;)); do :; done"} {
				g.add(fam, set+"; "+use)
			}
		}
		for _, use := range []string{"(( BASH_REMATCH ))", "(( BASH_REMATCH[0] ))", "echo $(( BASH_REMATCH ))",
			"[[ BASH_REMATCH -eq 0 ]]", "let BASH_REMATCH", "echo ${a[BASH_REMATCH]}", ": ${x:BASH_REMATCH}"} {
			g.add(fam, "[[ '"+sub+"' =~ .* ]]; "+use)
			g.add(fam, "[[ '"+sub+"' =~ (.*) ]] && "+use)
		}
		for _, set := range []string{"x='" + sub + "'", "printf -v x %s '" + sub + "'", "read x <<< '" + sub + "'",
			"read <<< '" + sub + "'", "mapfile -t x <<< '" + sub + "'", "for x in '" + sub + "'; do :; done",
			"getopts :a: x -a'" + sub + "'", "x=('" + sub + "')", "declare x='" + sub + "'", "x=$'" + sub + "'"} {
			for _, use := range []string{"(( x ))", "echo $((x))", "echo $((x+1))", "[[ x -eq 0 ]]", ": ${y:x}", "echo ${a[x]}",
				"let x", "(( REPLY ))", "[[ REPLY -eq 1 ]]", "(( OPTARG ))", "for ((i=x;0;)); do :; done", "echo ${y:0:x}"} {
				if g.r.IntN(2) == 0 {
					g.add(fam, set+"; "+use)
				}
			}
		}
		// Quotes that bash drops inside $(( )) and ${a[...]}; array assignment subscripts.
		for _, t := range []string{"echo $(( '%[1]s' ))", `echo $(( "%[1]s" ))`, "echo ${a['$(%[2]s)']}", `echo "${a['$(%[2]s)']}"`,
			`echo ${a["\$(%[2]s)"]}`, ": ${#a['$(%[2]s)']}", "(( a['$(%[2]s)'] ))", "echo $(( a['$(%[2]s)'] ))", "a['$(%[2]s)']=1",
			`a["\$(%[2]s)"]=1`, "a=(['$(%[2]s)']=1)", "a+=(['$(%[2]s)']=1)", "declare -a a=(['$(%[2]s)']=1)",
			"echo ${x:'$(%[2]s)'}", `echo "${x:'$(%[2]s)'}"`, `echo "${x: '$(%[2]s)' }"`, "a[x]='$(%[2]s)'; (( a[x] ))",
			"echo $(( '$(%[2]s)' ))", `(( "a[\$(%[2]s)]" ))`, "let '%[1]s'", `let "%[1]s"`, "(( '%[1]s' ))",
			"echo $[ '%[1]s' ]", "[[ '%[1]s' -eq 0 && -v a ]]", "case 1 in $(( '%[1]s' ))) ;; esac"} {
			g.add(fam, fill(t, sub, p))
		}
	}
}

// genDquoteParam: single quotes inside a double-quoted ${x…} word are literal to bash.
func genDquoteParam(g *gen, fam string) {
	for _, p := range payloads {
		for _, op := range []string{":-", "-", ":+", "+", ":=", "=", "#", "##", "%", "%%", "/", "//", "/#", "^", ",", ":?"} {
			if (op == ":+" || op == "+") && g.r.IntN(2) == 0 {
				continue
			}
			set := ""
			if strings.Contains(op, "+") || strings.HasPrefix(op, "#") || strings.HasPrefix(op, "%") || strings.HasPrefix(op, "/") {
				set = "x=1; "
			}
			g.add(fam, inContext(g, set+`echo "${x`+op+`'$(`+p+`)'}"`))
			g.add(fam, set+`: "${x`+op+`'`+"`"+p+"`"+`'}"`)
			g.add(fam, set+`echo "${x`+op+`'a'$(`+p+`)'b'}"`)
		}
		g.add(fam, `echo "${x:-'`+"'$("+p+")'"+`'}"`)
		g.add(fam, `echo "$x${x:-'$(`+p+`)'}"`)
		g.add(fam, `echo "'$(`+p+`)'"`)
		g.add(fam, `echo "${a['$(`+p+`)']:-x}"`)
	}
}

// ---- brace expansion from quoted parts -------------------------------------------------

func genBrace(g *gen, fam string) {
	m := phMark
	for _, b := range []string{
		"sort {-o,%[1]s} a.txt", `sort {"-o",%[1]s} a.txt`, "sort {'-o',%[1]s} a.txt", `sort {\-o,%[1]s} a.txt`,
		"sort {$'-o',%[1]s} a.txt", "sort a.txt {-o,%[1]s}", "sort {{-o,%[1]s},a.txt}", "sort {-o%[1]s,a.txt}",
		`sort {"--output=%[1]s",a.txt}`, "sort {--output,%[1]s} a.txt", "sort --{output,}=%[1]s a.txt", "sort -{o,r} %[1]s a.txt",
		"sort {-,}o %[1]s a.txt", `sort {"-"o,%[1]s} a.txt`, "sort {'-'o,%[1]s} a.txt", `sort {-\o,%[1]s} a.txt`,
		"{sort,-o,%[1]s,a.txt}", "{sort,-o%[1]s} a.txt", `{sort,"-o"} %[1]s a.txt`, "{sort,a.txt} -o %[1]s",
		"find . -maxdepth 0 {-fprint,%[1]s}", `find . -maxdepth 0 {"-fprint",%[1]s}`, "find . -maxdepth 0 -{fprint,maxdepth} %[1]s",
		`find . -maxdepth 0 {"-exec",touch,%[1]s,";"}`, "find . -maxdepth 0 {-ex,-ex}ec touch %[1]s \\;",
		"find . -maxdepth 0 -{exec,true} touch %[1]s \\;", "sed {-i,s/hello/bye/} %[2]s", `sed {"-i",s/a/b/} %[2]s`,
		"sed -n {w%[1]s,a.txt}", `sed -n {"w %[1]s",a.txt}`, "sed {-n,'w %[1]s'} a.txt", `sed "{w,}" a.txt`,
		"uniq {a.txt,%[1]s}", `uniq {"a.txt",%[1]s}`, "uniq a.txt{,x} %[1]s", "git log {--output=%[1]s,-1}",
		`git log {"--output=%[1]s",-1}`, "git {log,--output=%[1]s}", "git log {--out,--out}put=%[1]s", "git {-c,alias.x=!./hook} x",
		"git {-C,evil} status", `git {"-C",evil} status`, "git {--git-dir=evil/.git,status}", "rg {--pre=./hook,hello} a.txt",
		`rg {"--pre",./hook} hello a.txt`, "file {-C,-m,%[1]s.magic}", "env {-S,'touch %[1]s'}", `env {"-S","touch %[1]s"}`,
		"printf -v {'a[$(touch %[1]s)]',x}", `printf {-v,"a[\$(touch %[1]s)]"} x`, "test {-v,'a[$(touch %[1]s)]'}",
		"mapfile {-C,'touch %[1]s'} -c 1 x < a.txt", "sort {-o,%[1]s,a.txt}", "sort {,-o} %[1]s a.txt",
		"sort -{o,-} %[1]s a.txt", "sort {-o,%[1]s}{,} a.txt", "sort {-o,%[1]s}\\\n a.txt", "sort {-o,\\\n%[1]s} a.txt",
		"sort {-o,%[1]s,\"\"} a.txt", "sort {-o,%[1]s}'' a.txt", "{sort,-o,%[1]s} a.txt",
	} {
		g.add(fam, fill(b, m, phInput))
		g.add(fam, inContext(g, fill(b, m, phInput)))
	}
}

// ---- functions shadowing commands ------------------------------------------------------

func genFuncs(g *gen, fam string) {
	bodies := []string{"touch " + phMark, "sort -o " + phMark + " \"$@\"", "command sort -o " + phMark + " a.txt",
		"printf -v 'a[$(touch " + phMark + ")]' x", "\"$@\"", ": > " + phMark, "echo > " + phMark, ":", "return 0",
		"find . -maxdepth 0 -fprint " + phMark}
	names := []string{"ls", "/bin/ls", "/usr/bin/cat", "cat", "sort", "git", "echo", "printf", "test", "[", "read", "cd",
		"command_not_found_handle", "wc", "head", "grep", "tree", "jq", "sed", "/usr/bin/sort", "./ls", "command", "env",
		"nice", "timeout", "builtin", "true", ":"}
	defs := []string{"%s() { %s; }", "function %s { %s; }", "function %s() { %s; }", "%s() ( %s )", "%s () {\n%s\n}",
		"%s() { %s; } >/dev/null", "%s()\n{ %s; }", "%s() if :; then %s; fi"}
	calls := map[string]string{"command_not_found_handle": "tree; nosuchcmd; ./nosuchcmd; jq -n 1 >/dev/null; tree a.txt",
		"tree": "tree", "[": "[ -e a.txt ]", "cd": "cd .", "read": "read x <<< 1", "test": "test -e a.txt", ":": ":",
		"./ls": "./ls"}
	for _, n := range names {
		call, ok := calls[n]
		if !ok {
			call = n + " a.txt"
		}
		for _, d := range defs {
			for _, b := range bodies {
				if g.r.IntN(3) != 0 && b != bodies[0] && b != ":" {
					continue
				}
				g.add(fam, fmt.Sprintf(d, n, b)+"; "+call)
			}
		}
		g.add(fam, fmt.Sprintf("%s() { touch %s; }; command %s", n, phMark, call))
		g.add(fam, fmt.Sprintf("%s() { touch %s; }\n%s", n, phMark, call))
		g.add(fam, fmt.Sprintf("%s() { touch %s; } && %s", n, phMark, call))
	}
	// command_not_found_handle runs for any command not found, and for table commands
	// that are not installed (tree here).
	for _, b := range bodies {
		for _, call := range []string{"tree", "tree -o x", "nosuch", "ls; tree", "tree | cat", "$(tree)"} {
			g.add(fam, "command_not_found_handle() { "+b+"; }; "+call)
		}
	}
	g.add(fam, "tree -o "+phMark)
	g.add(fam, "tree -R -H . -o "+phMark)
}

// ---- mapfile callbacks ----------------------------------------------------------------------

func genMapfile(g *gen, fam string) {
	for _, cmd := range []string{"mapfile", "readarray"} {
		for _, p := range payloads {
			for _, f := range []string{"-C '%s' -c 1 x", "-C'%s' -c1 x", "-c 1 -C '%s' x", "-tC '%s' -c 1", "-C '%s' x",
				`-C "%s" -c 1 x`, "-C $'%s' -c 1 x", "-c1 -C'%s'", "-t -C '%s' -c 1 -- x", "-C ':; %s' -c 1 x",
				"-O 1 -C '%s' -c 1 x", "-s 0 -C '%s' -c 1 x"} {
				arg := fmt.Sprintf(f, p)
				for _, in := range []string{"< a.txt", "<<< x", "< " + phInput} {
					if g.r.IntN(2) == 0 && in != "< a.txt" {
						continue
					}
					g.add(fam, inContext(g, cmd+" "+arg+" "+in))
				}
			}
		}
		g.add(fam, "echo x | "+cmd+" -C 'touch "+phMark+"' -c 1 x")
		g.add(fam, cmd+" {-C,'touch "+phMark+"'} -c 1 x < a.txt")
		g.add(fam, cmd+" -C\\\n'touch "+phMark+"' -c 1 x < a.txt")
	}
}

// ---- line structure ------------------------------------------------------------------------

func genLines(g *gen, fam string) {
	m := phMark
	for _, first := range []string{"ls", "echo hi", "true", ":", "cat a.txt", "git status"} {
		for _, c := range []string{"# c \\", "#\\", "# \\\\\\", "#", "# it's", "# \"", "# $(", "# `"} {
			for _, next := range []string{"touch " + m, "sort -o " + m + " a.txt", "id > " + m} {
				g.add(fam, first+" "+c+"\n"+next)
			}
		}
		g.add(fam, first+" #\\\ntouch "+m+" # \\")
		g.add(fam, first+"; # \\\n touch "+m)
		g.add(fam, first+" #$(touch "+m+")")
		g.add(fam, first+"#$(touch "+m+")")
		g.add(fam, first+" \\#$(touch "+m+")")
		g.add(fam, first+" \\\n#\\\ntouch "+m)
	}
	for _, c := range []string{"so\\\nrt -o " + m + " a.txt", "sort -\\\no " + m + " a.txt", "sort \\\n-o \\\n" + m + " a.txt",
		"sort -o\\\n" + m + " a.txt", "sort --out\\\nput=" + m + " a.txt", "l\\\ns; tou\\\nch " + m, "ls \\\n; touch " + m,
		"ls \\\r\ntouch " + m, "ls\r\ntouch " + m, "ls;\\\ttouch " + m, "echo $'a\nb'\ntouch " + m, "echo 'a\\\n'; touch " + m,
		"echo \"a\\\n\"; sort -o " + m + " a.txt", "ls && \\\ntouch " + m, "ls |\\\n tee " + m, "ls '\\\n' > " + m,
		"echo \\\\\ntouch " + m, "echo x\\\\\\\ntouch " + m, "printf '%s\\n' \\\n'a[$(touch " + m + ")]' -v x"} {
		g.add(fam, c)
	}
}

// genHeredoc: here-doc delimiters bash and the parser may end at different lines, and
// bodies bash expands.
func genHeredoc(g *gen, fam string) {
	m := phMark
	for _, c := range []string{
		"cat <<EOF\nx\nEO\\\nF\ntouch %[1]s\nEOF", "cat <<EO\\\nF\nx\nEOF\ntouch %[1]s\nEO\\\nF", "cat <<'EOF'\nx\nEO\\\nF\ntouch %[1]s\nEOF",
		"cat <<\"EOF\"\nEO\\\nF\ntouch %[1]s\nEOF", "cat <<-EOF\n\tEO\\\nF\ntouch %[1]s\nEOF", "cat <<EOF\nx\\\nEOF\ntouch %[1]s\nEOF",
		"cat <<EOF\n\\\nEOF\ntouch %[1]s\nEOF", "cat <<E\\OF\nEO\\\nF\ntouch %[1]s\nEOF", "cat <<EOF; touch %[1]s\nx\nEOF",
		"cat <<EOF\n$(touch %[1]s)\nEOF", "cat <<EOF\n`touch %[1]s`\nEOF", "cat <<EOF\n${x:-$(touch %[1]s)}\nEOF",
		"cat <<E\"O\"F\n$(touch %[1]s)\nEOF", "cat <<\\EOF\n$(touch %[1]s)\nEOF", "cat <<'EOF'\n$(touch %[1]s)\nEOF",
		"cat <<-EOF\n\t$(touch %[1]s)\n\tEOF", "cat <<EOF\n$((a[$(touch %[1]s)]))\nEOF", "cat <<EOF\n$'x'$(touch %[1]s)\nEOF",
		"cat <<EOF\n\\$(touch %[1]s)\nEOF", "cat <<EOF\n'$(touch %[1]s)'\nEOF", "cat <<EOF\n\"$(touch %[1]s)\"\nEOF",
		"cat <<EOF\nEOF \ntouch %[1]s\nEOF", "cat <<EOF\n EOF\ntouch %[1]s\nEOF", "cat <<EOF\nEOF\\\ntouch %[1]s\nEOF",
		"cat << EOF\nx\nEOF\ntouch %[1]s", "cat <<EOF\nx\nEOF", "cat <<EOF | sort -o %[1]s\nx\nEOF", "cat <<EOF > %[1]s\nx\nEOF",
		"read x <<EOF\na[$(touch %[1]s)]\nEOF", "read x <<'EOF'\na[$(touch %[1]s)]\nEOF\n(( x ))", "cat <<<$(touch %[1]s)",
		"cat <<< \"$(touch %[1]s)\"", "cat <<< '$(touch %[1]s)'", "cat <<EOF\n${x@P}\nEOF", "x='$(touch %[1]s)'; cat <<EOF\n${x@P}\nEOF",
		"cat <<EOF\n$(cat <<EOG\n$(touch %[1]s)\nEOG\n)\nEOF", "cat <<EOF <<EOG\nx\nEOF\n$(touch %[1]s)\nEOG",
		"cat <<EOF\nx\nEOF\n$(touch %[1]s)", "cat <<EOF && ls\nx\nEOF\ntouch %[1]s", "cat <<\\\nEOF\nx\nEOF\ntouch %[1]s",
	} {
		g.add(fam, fill(c, m, ""))
	}
}

// ---- redirections ---------------------------------------------------------------------------

func genRedirects(g *gen, fam string) {
	m := phMark
	ops := []string{">", ">>", ">|", "&>", "&>>", "2>", "1>", "<>", "1<>", ">&", "2>>", "3>", "{fd}>", "0<>"}
	targets := []string{m, "'" + m + "'", `"` + m + `"`, `\` + m, "$'" + m + "'", "./" + m, "~/" + m, m[:1] + "''" + m[1:],
		"sub/../" + m, "/dev/null/../../" + m}
	cmds := []string{"ls", "echo x", ":", "", "true", "cat a.txt", "git status", "printf x", "{ ls; }", "( ls )",
		"if :; then :; fi", "case x in esac", "case x in y) ;; esac", "while false; do :; done", "for x in; do :; done",
		"[[ x ]]", "(( 1 ))", "f() { :; }", "select x in; do :; done", "! ls", "time ls", "ls | cat", "ls && ls",
		"{ :; }", "until :; do :; done", "for ((;0;)); do :; done", "coproc ls"}
	for _, c := range cmds {
		for _, op := range ops {
			if g.r.IntN(2) == 0 && op != ">" {
				continue
			}
			t := targets[0]
			if g.r.IntN(2) == 0 {
				t = pick(g, targets)
			}
			pre := ""
			if c != "" {
				pre = c + " "
			}
			g.add(fam, pre+op+t)
			g.add(fam, pre+op+" "+t)
		}
		if c != "" {
			g.add(fam, c+" > "+m+"; "+c)
			g.add(fam, "> "+m+" "+c)
		}
	}
	for _, t := range targets {
		g.add(fam, "ls > "+t)
		g.add(fam, "ls >& "+t)
	}
	for _, c := range []string{"f() { :; } > %[1]s; f", "f() { ls; } >%[1]s\nf", "ls >/dev/null >%[1]s", "ls 2>&1 >%[1]s",
		"ls > {%[1]s,x}", "ls > %[1]s{,}", "ls > /dev/fd/1 > %[1]s", "ls > /proc/self/cwd/%[1]s", "ls > /dev/stdout",
		"ls 3>%[1]s >&3", "exec 3>%[1]s", "ls > $'\\x4d'_x", "echo x >& 2 > %[1]s", "printf x > /dev/null 2>%[1]s",
		"ls >%[1]s<a.txt", "cat < %[1]s > /dev/null", "cat a.txt >$HOME/%[1]s", "cat a.txt >$PWD/%[1]s",
		"ls > \"${x:-%[1]s}\"", "ls >> ${x-%[1]s}", "ls >%[1]s 2>/dev/null", "ls >/dev/tcp/127.0.0.1/1", "ls > >(cat > %[1]s)",
		"ls >(touch %[1]s)", "cat <(touch %[1]s)", "diff <(ls) >(cat >%[1]s)", "tee %[1]s < a.txt", "ls | tee -a %[1]s",
		"echo x | cat - > %[1]s", "echo 'x' 1>&2 2>%[1]s", "exec >%[1]s", "ls 1>|%[1]s", "ls <>%[1]s", "ls &>%[1]s &"} {
		g.add(fam, fill(c, m, ""))
	}
}

// ---- substitutions --------------------------------------------------------------------------

// genSubst: command and process substitutions in the arguments of read-only commands;
// the classifier should see through every one.
func genSubst(g *gen, fam string) {
	for _, p := range payloads {
		for _, t := range []string{"echo $(%s)", "echo \"$(%s)\"", "echo `%s`", "ls \"`%s`\"", "echo ${x:-$(%s)}",
			"echo \"${x:-$(%s)}\"", "echo $(( $(%s) ))", "cat <(%s)", "echo >(%s)", "echo $(echo $(%s))",
			"echo ${x:=$(%s)}", "echo ${x/$(%s)/}", "echo ${x[$(%s)]}", "[[ -n $(%s) ]]", "(( $(%s) ))", "case $(%s) in esac",
			"for x in $(%s); do :; done", "echo $'$(%s)'; echo \"$(%s)\"", "x=$(%s)", "x=`%s` ls", "echo ${|%s;}", "echo ${ %s;}",
			"git log \"$(%s)\"", "sort \"$(%s)\"", "cd \"$(%s)\"", "echo \"'$(%s)'\"", "echo '$('\"$(%s)\"", "declare x=$(%s)",
			"test $(%s)", "[ \"$(%s)\" ]", "echo x | read \"$(%s)\""} {
			g.add(fam, inContext(g, strings.ReplaceAll(t, "%s", p)))
		}
	}
}

// genZsh: text bash reads as an extended glob or as literal text, which zsh runs: glob
// qualifiers (e:…:, P:…:, #q with EXTENDED_GLOB) after any pattern, and $~x / $=x, which
// glob or split a value set on the line. In bash they are harmless.
func genZsh(g *gen, fam string) {
	m := phMark
	for _, pat := range []string{"*", "a*", "*.txt", "?.txt", "a.tx?", "[a]*", "sub/*", "*/*.txt", "**/*.txt"} {
		for _, q := range []string{"(e:'touch %[1]s':)", "(e.'id > %[1]s'.)", "(e{': > %[1]s'})", "(.e:'touch %[1]s':)",
			"(#qe:'touch %[1]s':)", "(N)(e:'touch %[1]s':)"} {
			for _, cmd := range []string{"ls ", "cat ", "wc -l ", "echo \"$(ls ", "git log -- "} {
				w := pat + fill(q, m, "")
				if strings.HasSuffix(cmd, "(ls ") {
					w += ")\""
				}
				g.add(fam, cmd+w)
			}
		}
		g.add(fam, "sort "+pat+"(P:-o"+m+":)")
	}
	for _, t := range []string{"x='*(e:touch %[1]s:)'; ls $~x", "x='*(e:touch %[1]s:)'; echo \"$(ls $~x)\"", "x='-o %[1]s'; sort $=x a.txt",
		"for x in '-o %[1]s'; do sort $=x a.txt; done", "x='--output=%[1]s'; git diff $=x", "x='*(e:touch %[1]s:)'; cat $~x",
		"echo ${x:-*(e:'touch %[1]s':)}", "ls ${x:-a*(e:'touch %[1]s':)}", "cat ${x:-*.txt(e.'id > %[1]s'.)}",
		"y='*(e:touch %[1]s:)'; echo ${x:-$~y}", "echo ${x:-${y:-*(e:'touch %[1]s':)}}"} {
		g.add(fam, fill(t, m, ""))
	}
}

// genSh: $'…' is a $ and a single-quoted string to dash, so a quote bash reads as escaped
// ends dash's string and what follows runs.
func genSh(g *gen, fam string) {
	for _, p := range payloads {
		for _, t := range []string{"echo $'a\\' ; %[1]s ; # '", "ls $'\\' ; %[1]s ; # '", "cat $'x\\'; %[1]s #'",
			"echo $'\\' && %[1]s ; # '", "echo $'\\n\\' ; %[1]s ; true # '"} {
			g.add(fam, fill(t, p, ""))
		}
	}
}

// ---- generator tests ----------------------------------------------------------------------------

// TestGenerate needs no root: the corpus is deterministic, large enough, and every
// command carries its own marker name or reaches ./hook (which writes it).
func TestGenerate(t *testing.T) {
	a, b := generate(corpusSeed), generate(corpusSeed)
	if !slices.EqualFunc(a, b, func(x, y gcase) bool { return x.cmd == y.cmd && x.family == y.family }) {
		t.Fatal("generation is not deterministic")
	}
	if len(a) < 3000 {
		t.Fatalf("%d commands generated, want at least 3000", len(a))
	}
	counts := map[string]int{}
	markRE := regexp.MustCompile(`M_[0-9]+`)
	for _, c := range a {
		counts[c.family]++
		if strings.Contains(c.cmd, "\x01") {
			t.Errorf("unsubstituted placeholder in %q", c.cmd)
		}
		for _, mm := range markRE.FindAllString(c.cmd, -1) {
			if mm != c.mark() {
				t.Errorf("%q names another command's marker %s", c.cmd, mm)
			}
		}
	}
	for _, f := range families {
		if counts[f.name] == 0 {
			t.Errorf("family %s generated nothing", f.name)
		}
	}
	t.Logf("%d commands: %v", len(a), counts)
}
