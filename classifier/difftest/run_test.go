package difftest

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// searchBudget is how long after the start the harness keeps searching for the commands
// behind unattributed writes (see runner.searchUntil).
const searchBudget = 35 * time.Second

// nobody runs the generated commands: never root.
const nobody = 65534

// cpuLimitSec bounds the CPU time of one generated command (RLIMIT_CPU, set by the driver
// for its children, so it costs no process): one that spins is killed by SIGXCPU and
// reported as hung. A command that blocks without spinning ends the batch at its deadline,
// which names the command that had started last.
const cpuLimitSec = "5"

// driver is the script the sandbox child runs: it reads NUL-separated (id, command)
// records on stdin and runs each with the shell its arguments name, as the Bash tool runs
// bash (`bash --noprofile --norc -c CMD`), in a shell of its own with stdin, stdout and
// stderr on /dev/null, so no command can consume the records, change the driver's state or
// hide another's result.
// DIFFTEST_MARK tells ./hook whose run it is.
const driver = `cd "$DIFFTEST_DIR" || exit 99
ulimit -t ` + cpuLimitSec + ` || exit 97
n=0
while IFS= read -r -d '' id && IFS= read -r -d '' cmd; do
	echo "start $id"
	DIFFTEST_MARK=M_$id "$@" -c "$cmd" </dev/null >/dev/null 2>&1
	[ $? = 152 ] && echo "hung $id"
	n=$((n+1))
	cd "$DIFFTEST_DIR" || exit 98
done
echo "ran $n"
`

// hook is what the harness plants wherever a program may be run by configuration: it
// leaves a file named after the command that made it run.
const hook = "#!/bin/sh\n: > \"$DIFFTEST_DIR/${DIFFTEST_MARK:-M_x}_hook\"\nexit 0\n"

// canary runs last in every batch, with id 0: it must write canary/M_0 and, through
// ./hook, canary/M_0_hook, or the harness cannot see writes at all (workspace not
// writable, hook not run, driver broken). It writes in a directory of its own so that it
// explains no change of any other directory.
const canary = "id > canary/M_0; DIFFTEST_DIR=$PWD/canary ./hook"

// canaryWrites is what the canary leaves, in diff's words.
var canaryWrites = []string{"canary (modified)", "canary/M_0 (new)", "canary/M_0_hook (new)"}

var markRE = regexp.MustCompile(`M_([0-9]+)`)

// oldTime is the mtime of every fixture file, so no file is racily clean for git.
var oldTime = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// runner runs batches of commands in the sandbox, each batch in a fresh copy of the
// template workspace.
type runner struct {
	s     *sandbox.Sandbox
	shell []string // the shell that runs each command, with its options
	base  string   // 0755 dir under /var/tmp (a child's /tmp is private)
	tmpl  string   // the template workspace
	calls int
	// searchUntil ends the search for the command behind an unattributed write: after it a
	// batch's unattributed writes are reported for the batch as a whole, which bounds the
	// run time when many commands write files not named after them.
	searchUntil time.Time
}

// result is what one batch run found.
type result struct {
	wrote map[int][]string // id -> what it wrote ("M_3 (new)")
	hung  []int
	// unattributed are writes of a batch whose command was not searched for (searchUntil).
	unattributed []string
}

func newRunner(t *testing.T, s *sandbox.Sandbox, shell []string) *runner {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "sandboxd-difftest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runner{s: s, shell: shell, base: base, tmpl: filepath.Join(base, "template"), searchUntil: time.Now().Add(searchBudget)}
	if err := makeTemplate(r.tmpl); err != nil {
		t.Fatal(err)
	}
	return r
}

// makeTemplate builds the workspace every batch starts from: text files, a git repository
// with history and an unstaged change, and evil/, a nested repository whose config runs
// ./hook for fsmonitor, pager, external diff, textconv, editor and an alias. Both
// repositories use core.checkStat=minimal and old mtimes, so a copy's index is fresh and
// read-only git commands have no reason to rewrite it.
func makeTemplate(dir string) error {
	var big strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&big, "%d line %d\n", (i*7919)%3001, i)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("hello\n"))
	zw.Close()
	files := map[string]string{
		"a.txt": "hello\nworld\nfoo\n", "b.txt": "b\n", "big.txt": big.String(), "a.gz": gz.String(),
		"sub/c.txt": "c\n", "hook": hook, "canary/.keep": "",
		"evil/t.txt": "t\n", "evil/sub/u.txt": "u\n", "evil/.gitattributes": "*.txt diff=t\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if name == "hook" {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
	}
	git := func(d string, args ...string) error {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main",
			"-c", "core.fsmonitor=false", "-c", "safe.directory=*"}, args...)...)
		cmd.Dir = d
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_DATE=2020-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2020-01-02T03:04:05Z"}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v in %s: %v: %s", args, d, err, out)
		}
		return nil
	}
	evil := filepath.Join(dir, "evil")
	steps := []struct {
		d    string
		args []string
	}{
		{dir, []string{"init", "-q"}},
		{dir, []string{"config", "core.checkStat", "minimal"}},
		{dir, []string{"config", "core.trustctime", "false"}},
		{dir, []string{"add", "a.txt", "b.txt", "sub/c.txt"}},
		{dir, []string{"commit", "-qm", "one"}},
		{dir, []string{"tag", "v1"}},
		{dir, []string{"branch", "side"}},
		{evil, []string{"init", "-q"}},
		{evil, []string{"config", "core.checkStat", "minimal"}},
		{evil, []string{"config", "core.trustctime", "false"}},
		{evil, []string{"add", "."}},
		{evil, []string{"commit", "-qm", "evil"}},
	}
	for _, s := range steps {
		if err := git(s.d, s.args...); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello\nworld\nfoo\nbar\n"), 0o644); err != nil {
		return err
	}
	if err := git(dir, "commit", "-qam", "two"); err != nil {
		return err
	}
	// Unstaged changes, so diff has something to show (and run evil's external diff for).
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b2\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(evil, "t.txt"), []byte("t2\n"), 0o644); err != nil {
		return err
	}
	h := `"$DIFFTEST_DIR/hook"`
	for _, kv := range [][2]string{{"core.fsmonitor", h}, {"core.pager", h}, {"diff.external", h}, {"diff.t.textconv", h},
		{"core.editor", h}, {"alias.x", "!" + h}, {"sequence.editor", h}} {
		if err := git(evil, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, nobody, nobody); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return os.Chtimes(p, oldTime, oldTime)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Refresh both indexes against the final stat data.
	for _, d := range []string{dir, evil} {
		if err := git(d, "update-index", "-q", "--refresh"); err != nil && !strings.Contains(err.Error(), "needs update") {
			return err
		}
		if err := os.Chown(filepath.Join(d, ".git", "index"), nobody, nobody); err != nil {
			return err
		}
	}
	return nil
}

// dir is the workspace every batch runs in, one batch at a time: the commands were
// classified with it as their Cwd, WorkDirs and Home.
func (r *runner) dir() string { return filepath.Join(r.base, "ws") }

// workspace copies the template and adds the per-command input files.
func (r *runner) workspace(cases []gcase) (string, error) {
	r.calls++
	dir := r.dir()
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if out, err := exec.Command("cp", "-a", r.tmpl, dir).CombinedOutput(); err != nil {
		return "", fmt.Errorf("cp: %v: %s", err, out)
	}
	for _, c := range cases {
		for name, content := range c.files {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				return "", err
			}
			if err := os.Chown(p, nobody, nobody); err != nil {
				return "", err
			}
			if err := os.Chtimes(p, oldTime, oldTime); err != nil {
				return "", err
			}
		}
	}
	return dir, os.Chtimes(dir, oldTime, oldTime)
}

// entry is what a snapshot keeps of one path.
type entry struct {
	mode  fs.FileMode
	size  int64
	mtime int64
	ino   uint64
}

func snapshot(dir string) (map[string]entry, error) {
	snap := map[string]entry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		e := entry{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
		if st, ok := sysStat(fi); ok {
			e.ino = st
		}
		snap[rel] = e
		return nil
	})
	return snap, err
}

// run runs cases in one fresh workspace. A write named after a command is that command's.
// A directory changed where such a write was made may hide another command's file made
// and removed again, so the batch is run once more without the commands already known to
// write. Any other write makes run split the batch and try again, down to one command.
func (r *runner) run(ctx context.Context, cases []gcase) (result, error) {
	res := result{wrote: map[int][]string{}}
	dir, err := r.workspace(cases)
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	before, err := snapshot(dir)
	if err != nil {
		return res, err
	}
	out, err := r.exec(ctx, dir, cases)
	if err != nil {
		return res, err
	}
	after, err := snapshot(dir)
	if err != nil {
		return res, err
	}
	ids := map[int]bool{}
	for _, c := range cases {
		ids[c.id] = true
	}
	attributed, other, dirsOnly := diff(before, after, ids)
	if slices.ContainsFunc(canaryWrites, func(w string) bool { return !slices.Contains(other, w) }) {
		return res, fmt.Errorf("canary %q: want it to leave %v, found %v: the harness cannot see writes (driver said %q)",
			canary, canaryWrites, other, tail(out))
	}
	other = slices.DeleteFunc(other, func(w string) bool { return slices.Contains(canaryWrites, w) })
	for _, line := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(line, "hung "); ok {
			n, _ := strconv.Atoi(id)
			res.hung = append(res.hung, n)
		}
	}
	switch {
	case len(other) == 0:
		res.wrote = attributed
		return res, nil
	case len(cases) == 1:
		res.wrote = attributed
		res.wrote[cases[0].id] = append(res.wrote[cases[0].id], other...)
		return res, nil
	case dirsOnly && len(attributed) > 0:
		rest := slices.DeleteFunc(slices.Clone(cases), func(c gcase) bool { return attributed[c.id] != nil })
		res.wrote = attributed
		if len(rest) == 0 {
			return res, nil
		}
		again, err := r.run(ctx, rest)
		if err != nil {
			return res, err
		}
		maps.Copy(res.wrote, again.wrote)
		res.hung = again.hung
		res.unattributed = again.unattributed
		return res, nil
	}
	if time.Now().After(r.searchUntil) {
		res.wrote = attributed
		res.unattributed = append(res.unattributed, fmt.Sprintf("some of %d commands (ids %d to %d) wrote %s",
			len(cases), cases[0].id, cases[len(cases)-1].id, strings.Join(other, ", ")))
		return res, nil
	}
	// Unattributed writes: find their command by halving the batch.
	res.hung = nil
	for _, half := range [][]gcase{cases[:len(cases)/2], cases[len(cases)/2:]} {
		h, err := r.run(ctx, half)
		if err != nil {
			return res, err
		}
		maps.Copy(res.wrote, h.wrote)
		res.hung = append(res.hung, h.hung...)
		res.unattributed = append(res.unattributed, h.unattributed...)
	}
	return res, nil
}

// exec runs the driver over cases (the canary last) in dir and returns its output.
func (r *runner) exec(ctx context.Context, dir string, cases []gcase) (string, error) {
	var in bytes.Buffer
	for _, c := range append(slices.Clone(cases), gcase{id: 0, cmd: canary}) {
		fmt.Fprintf(&in, "%d\x00%s\x00", c.id, c.cmd)
	}
	inPath := dir + ".in"
	if err := os.WriteFile(inPath, in.Bytes(), 0o600); err != nil {
		return "", err
	}
	defer os.Remove(inPath)
	stdin, err := os.Open(inPath)
	if err != nil {
		return "", err
	}
	defer stdin.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return "", err
	}
	defer pr.Close()
	hookPath := filepath.Join(dir, "hook")
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	p, err := r.s.Start(ctx, &sandbox.Spec{
		Path: "/bin/bash", Args: append([]string{"--noprofile", "--norc", "-c", driver, "driver"}, r.shell...),
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "LANG=C.UTF-8", "DIFFTEST_DIR=" + dir,
			"DIFFTEST_HOOK=" + hookPath, "GIT_OPTIONAL_LOCKS=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_PAGER=" + hookPath,
			"PAGER=" + hookPath, "EDITOR=" + hookPath, "VISUAL=" + hookPath, "GIT_EDITOR=" + hookPath},
		Dir: dir, UID: nobody, GID: nobody, WritableDirs: []string{dir},
		Session: "difftest", Call: "c" + strconv.Itoa(r.calls),
		Stdin: stdin, Stdout: pw, Stderr: pw,
	})
	pw.Close()
	if err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = buf.ReadFrom(pr); close(done) }()
	res, err := p.Wait()
	<-done
	out := buf.String()
	if err != nil || res.TimedOut {
		killed := ""
		if res != nil {
			killed = res.KilledBy
		}
		last := ""
		if i := strings.LastIndex(out, "start "); i >= 0 {
			last = strings.SplitN(out[i+len("start "):], "\n", 2)[0]
		}
		return out, fmt.Errorf("batch did not finish (%v, killed by %q); the command that started last is %s", err, killed, last)
	}
	if want := fmt.Sprintf("ran %d\n", len(cases)+1); res.ExitCode != 0 || !strings.HasSuffix(out, want) {
		return out, fmt.Errorf("driver exit %d (%s), output %q, want it to end %q", res.ExitCode, res.KilledBy, tail(out), want)
	}
	return out, nil
}

func tail(s string) string {
	if len(s) > 500 {
		return "…" + s[len(s)-500:]
	}
	return s
}

// diff compares two snapshots. A new, deleted or changed path naming M_<id> of one of
// ids (anywhere in the path) is that command's. Everything else is returned as other,
// sorted; dirsOnly is true when all of it is directories whose mtime or size changed
// where an attributed entry came or went (dirs where that write may be all that happened).
func diff(before, after map[string]entry, ids map[int]bool) (attributed map[int][]string, other []string, dirsOnly bool) {
	attributed = map[int][]string{}
	type change struct{ path, what string }
	var changes []change
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			changes = append(changes, change{p, "new"})
		case b != a:
			changes = append(changes, change{p, "modified"})
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			changes = append(changes, change{p, "deleted"})
		}
	}
	slices.SortFunc(changes, func(x, y change) int { return strings.Compare(x.path, y.path) })
	touched := map[string]bool{} // dirs where an attributed entry came or went
	var rest []change
	for _, c := range changes {
		if m := markRE.FindStringSubmatch(c.path); m != nil {
			if id, err := strconv.Atoi(m[1]); err == nil && ids[id] {
				attributed[id] = append(attributed[id], c.path+" ("+c.what+")")
				if c.what != "modified" {
					touched[filepath.Dir(c.path)] = true
				}
				continue
			}
		}
		rest = append(rest, c)
	}
	dirsOnly = true
	for _, c := range rest {
		if c.path == "canary" || strings.HasPrefix(c.path, "canary/") {
			other = append(other, c.path+" ("+c.what+")")
			continue
		}
		b, a := before[c.path], after[c.path]
		if !(c.what == "modified" && a.mode.IsDir() && b.mode == a.mode && b.ino == a.ino && touched[c.path]) {
			dirsOnly = false
		}
		other = append(other, c.path+" ("+c.what+")")
	}
	return attributed, other, dirsOnly
}

// sysStat is the inode number of fi.
func sysStat(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Ino, true
}
