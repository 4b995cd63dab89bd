package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// gitConfigKeys is what git itself reads from a config file: its keys as section[.sub].key,
// the subsection replaced by "*"; false when git refuses the file.
func gitConfigKeys(t testing.TB, content []byte) ([]string, bool) {
	f := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(f, content, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "config", "--file", f, "--list", "--name-only", "--null").Output()
	if err != nil {
		return nil, false
	}
	var keys []string
	for _, k := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if k == "" {
			continue
		}
		first, last := strings.Index(k, "."), strings.LastIndex(k, ".")
		if first != last {
			k = k[:first] + ".*" + k[last:]
		}
		keys = append(keys, strings.ToLower(k))
	}
	return keys, true
}

func needGit(t testing.TB) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

// TestSafeGitConfig: the configs git's own commands write for a new repository pass; any key
// that could run a program or pull in other config, and anything not read strictly, does not.
func TestSafeGitConfig(t *testing.T) {
	needGit(t)
	dir := t.TempDir()
	remote, clone := filepath.Join(dir, "remote"), filepath.Join(dir, "clone")
	for _, args := range [][]string{
		{"init", "-q", remote}, {"-C", remote, "commit", "-q", "--allow-empty", "-m", "x"},
		{"clone", "-q", remote, clone}, {"-C", clone, "remote", "add", "up", remote},
		{"-C", clone, "config", "user.name", "A"}, {"-C", clone, "config", "user.email", "a@b"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	for _, f := range []string{filepath.Join(remote, ".git", "config"), filepath.Join(clone, ".git", "config")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !safeGitConfig(b, noWorktree) {
			t.Errorf("what git wrote is refused:\n%s", b)
		}
	}
	for _, ok := range []string{"", "[core]\n\tbare = true\n[x]\n", "# c\n; c\n", "[core]\r\n\tbare = false\r\n", "[CORE] # x\n\tFileMode\n",
		"[remote \"a b\\\"c\"]\n\turl = x # y\n", "[submodule \"lib/x\"]\n\turl = ../x\n\tactive = true\n"} {
		if !safeGitConfig([]byte(ok), noWorktree) {
			t.Errorf("refused %q", ok)
		}
	}
	for _, bad := range []string{
		"[core]\n\tfsmonitor = touch x\n", "[core]\n\tFsMonitor = x\n", "[core]\n\thooksPath = h\n",
		"[core]\n\tsshCommand = x\n", "[core]\n\tpager = x\n", "[core]\n\teditor = x\n",
		"[include]\n\tpath = ../evil\n", "[includeIf \"gitdir:/\"]\n\tpath = ../evil\n",
		"[alias]\n\tst = !touch x\n", "[filter \"a\"]\n\tclean = touch x\n", "[diff \"a\"]\n\ttextconv = x\n",
		"[extensions]\n\tworktreeConfig = true\n", "[remote \"o\"]\n\tuploadpack = x\n",
		"[submodule \"s\"]\n\tupdate = !x\n", "[credential]\n\thelper = !x\n",
		"[core] fsmonitor = x\n", "[core.x]\n\tbare = true\n", "[remote.o]\n\turl = x\n", "bare = true\n",
		"[core]\n\tbare = \\\nfsmonitor\n", "[core\n", "[core]\n\t=x\n",
		"[remote \"o\"]\n\tfetch = x\n[core]\n\tfsmonitor = y\n", "[core]\n\tbare = true\n\tfsmonitor\n",
		"[core]\n\tworktree\n", "[core]\n\tworktree = \"x\"\n", "[core]\n\tworktree = x # y\n", "[core]\n\tworktree = a\\b\n",
	} {
		if safeGitConfig([]byte(bad), func(string) bool { return true }) {
			t.Errorf("passed %q", bad)
		}
	}
	if safeGitConfig([]byte("[core]\n"+strings.Repeat("\tbare = true\n", maxGitConfigBytes/12)), noWorktree) {
		t.Error("a config over the bound passed")
	}
}

// noWorktree passes no core.worktree.
func noWorktree(string) bool { return false }

// TestWorktreeWithin: a new repository's core.worktree may name its own dir or one below,
// outside its git dir (a submodule's), never a dir outside it or the git dir.
func TestWorktreeWithin(t *testing.T) {
	for _, tc := range []struct {
		top, dir, v string
		want        bool
	}{
		{".git", ".git", "..", true},
		{"p/.git", "p/.git/modules/lib", "../../../lib", true},
		{"p/.git", "p/.git/modules/a/b", "../../../../a/b", true},
		{".git", ".git", "/home/u", false},
		{".git", ".git", "../..", false},
		{"p/.git", "p/.git", "../../q", false},
		{"p/.git", "p/.git", ".", false},
		{"p/.git", "p/.git", "hooks", false},
		{"p/.git", "p/.git/modules/lib", "../..", false},
	} {
		if got := worktreeWithin(tc.top, tc.dir, tc.v); got != tc.want {
			t.Errorf("worktreeWithin(%q, %q, %q) = %v, want %v", tc.top, tc.dir, tc.v, got, tc.want)
		}
	}
}

// FuzzSafeGitConfig: whatever safeGitConfig passes, git reads no key outside safeGitKeys from.
func FuzzSafeGitConfig(f *testing.F) {
	needGit(f)
	for _, s := range []string{"[core]\n\tbare = true\n", "[remote \"o\"]\n\turl = x\n", "[core]\n\tfsmonitor = x\n", "[a \"b\"] # c\n\tk\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !safeGitConfig(b, noWorktree) {
			return
		}
		keys, ok := gitConfigKeys(t, b)
		if !ok {
			return // git refuses it: it runs nothing from it either
		}
		for _, k := range keys {
			if !safeGitKeys[k] {
				t.Fatalf("passed %q, where git reads %s", b, k)
			}
		}
	})
}

// TestNewRepoMadeSafe: a repository a call makes where the user runs git keeps what git init
// and clone write, and loses what would run code at the user's next git command there: a config
// key outside the safe ones, a hook, a commondir, a submodule's config; a .git file or link is
// moved aside whole, and so is a HEAD that makes the dir itself a (bare) repository. Without
// the guard (a call a person approved) all of it stays.
func TestNewRepoMadeSafe(t *testing.T) {
	t.Parallel()
	needGit(t)
	// Hard links allowed as an admin may (extra_syscalls), so the cases that make one see
	// that a second name of a new repository's config or hook is still moved aside.
	s := newTestSandbox(t, Config{ExtraSyscalls: []string{"link", "linkat"}})
	f := newProtectFixture(t)
	const plant = `printf '[core]\n\tfsmonitor = touch PWNED; false\n'`
	for i, tc := range []struct {
		script string
		moved  []string
	}{
		{`git init -q . && git config user.name a && git remote add o ../remote && git fetch -q o`, nil},
		{`git init -q . && git config core.fsmonitor 'touch PWNED; false' && printf '#!/bin/sh\ntouch PWNED\n' > .git/hooks/post-checkout && ` +
			`chmod +x .git/hooks/post-checkout && echo ../x > .git/commondir`, []string{".git/commondir", ".git/config", ".git/hooks"}},
		{`mkdir -p evil/objects evil/refs && echo 'ref: refs/heads/main' > evil/HEAD && ` + plant + ` > evil/config && echo 'gitdir: evil' > .git`, []string{".git"}},
		{`mkdir -p evil/objects evil/refs && echo 'ref: refs/heads/main' > evil/HEAD && ` + plant + ` > evil/config && ln -s evil .git`, []string{".git"}},
		{`git init -q . && mkdir -p .git/modules/lib/x/objects && echo 'ref: refs/heads/main' > .git/modules/lib/x/HEAD && ` +
			plant + ` > .git/modules/lib/x/config`, []string{".git/modules/lib/x/config"}},
		{`mkdir objects refs && echo 'ref: refs/heads/main' > HEAD && printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = .\n\tfsmonitor = touch PWNED; false\n' > config`, []string{"HEAD"}},
		{`git init -q . && git worktree add -q wt 2>/dev/null; git commit -q --allow-empty -m x && git worktree add -q wt && echo ../../../evil > .git/worktrees/wt/commondir`,
			[]string{".git/worktrees/wt/commondir"}},
		// A work tree outside the repository: the user's git reset there writes what it tracks.
		{`git init -q . && git config core.worktree "$HOME"`, []string{".git/config"}},
		{`git init -q . && ln -s "$HOME" w && git config core.worktree ../w`, []string{".git/config"}},
		{`git init -q . && mkdir w && git config core.worktree ../w`, nil},
		// A config or hook with a second name, which a later call could write past the mount.
		{`git init -q . && ln .git/config notes.txt`, []string{".git/config"}},
		{`git init -q . && ln .git/hooks/pre-commit.sample s.txt`, []string{".git/hooks"}},
		// A git dir the sweep cannot list or search goes whole: what it holds is unknown, and
		// the user, told to make it searchable, would run it.
		{`git init -q . && git config core.fsmonitor 'touch PWNED; false' && chmod 000 .git`, []string{".git"}},
		{`git init -q . && git config core.fsmonitor 'touch PWNED; false' && chmod 300 .git`, []string{".git"}},
		{`git init -q . && git config core.fsmonitor 'touch PWNED; false' && chmod 600 .git`, []string{".git"}},
		// What git submodule writes: a worktree below the superproject.
		{`git init -q . && mkdir -p .git/modules/lib lib && git init -q --bare .git/modules/lib && git --git-dir=.git/modules/lib config core.bare false && ` +
			`git --git-dir=.git/modules/lib config core.worktree ../../../lib`, nil},
	} {
		for _, guard := range []bool{true, false} {
			dir := filepath.Join(f.home, fmt.Sprintf("plain%d-%v", i, guard))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			chownR(t, dir)
			sp := f.spec(tc.script+" && echo done", dir, dir)
			sp.Env = append(sp.Env, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
			sp.MoveAsideCreated = guard
			sp.Call = "c1"
			res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
			if err != nil || !strings.Contains(out, "done") {
				t.Fatalf("case %d: %v %q", i, err, out)
			}
			var want []string
			if guard {
				for _, m := range tc.moved {
					want = append(want, filepath.Join(dir, m))
				}
			}
			if got := slices.Sorted(slices.Values(res.MovedAside)); !slices.Equal(got, want) {
				t.Errorf("case %d, guard %v: moved aside %v, want %v", i, guard, got, want)
			}
			if !guard {
				continue
			}
			// The user's own git in the dir afterwards runs nothing the call left.
			cmd := exec.Command("git", "-c", "safe.directory=*", "status")
			cmd.Dir, cmd.Env = dir, []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
			_ = cmd.Run()
			if _, err := os.Lstat(filepath.Join(dir, "PWNED")); err == nil {
				t.Errorf("case %d: git status in the new repository ran what the call left", i)
			}
		}
	}
}

// TestReadFD: a file up to the limit is read whole, one byte more is refused.
func TestReadFD(t *testing.T) {
	for _, size := range []int{0, 1, 16 << 10, 70000, 70001} {
		f := filepath.Join(t.TempDir(), "f")
		want := strings.Repeat("x", size)
		if err := os.WriteFile(f, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(f, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := readFD(fd, 70000)
		unix.Close(fd)
		if size <= 70000 && (err != nil || string(b) != want) || size > 70000 && err != unix.EFBIG {
			t.Errorf("size %d: %d bytes, %v", size, len(b), err)
		}
	}
}

// TestNewGitDirsInRepoMadeSafe: in a repository that existed when the call started, a
// submodule's git dir or a linked worktree's admin dir the call made (where the user's git
// status and submodule update later run) loses what would run code, as a new repository does;
// what `git submodule update --init` and `git worktree add` write stays, and so does what the
// user's own submodules held, even code.
func TestNewGitDirsInRepoMadeSafe(t *testing.T) {
	t.Parallel()
	needGit(t)
	s := newTestSandbox(t, Config{})
	const plant = `printf '[core]\n\tfsmonitor = touch PWNED; false\n'`
	newModule := func(d string) string {
		return `mkdir -p ` + d + `/objects ` + d + `/refs && echo 'ref: refs/heads/main' > ` + d + `/HEAD`
	}
	for i, tc := range []struct {
		script string
		moved  []string
	}{
		{newModule(".git/modules/new") + ` && ` + plant + ` > .git/modules/new/config`, []string{".git/modules/new/config"}},
		{newModule(".git/modules/new") + ` && mkdir .git/modules/new/hooks && printf '#!/bin/sh\ntouch PWNED\n' > .git/modules/new/hooks/post-checkout`,
			[]string{".git/modules/new/hooks"}},
		{newModule(".git/modules/old/modules/n") + ` && ` + plant + ` > .git/modules/old/modules/n/config`, []string{".git/modules/old/modules/n/config"}},
		{newModule(".git/modules/vendor/bar") + ` && ` + plant + ` > .git/modules/vendor/bar/config`, []string{".git/modules/vendor/bar/config"}},
		{newModule(".git/modules/lib/x") + ` && echo ../x > .git/modules/lib/x/commondir`, []string{".git/modules/lib/x/commondir"}},
		{`git worktree add -q wt && ` + newModule(".git/worktrees/wt/modules/m") + ` && ` + plant + ` > .git/worktrees/wt/modules/m/config`,
			[]string{".git/worktrees/wt/modules/m/config"}},
		{`git worktree add -q wt && echo ../../../evil > .git/worktrees/wt/commondir`, []string{".git/worktrees/wt/commondir"}},
		{`git worktree add -q wt && echo x > .git/worktrees/wt/config.worktree`, []string{".git/worktrees/wt/config.worktree"}},
		// A hook made in the user's submodule that had none.
		{`mkdir .git/modules/vendor/foo/hooks && printf '#!/bin/sh\ntouch PWNED\n' > .git/modules/vendor/foo/hooks/post-checkout`,
			[]string{".git/modules/vendor/foo/hooks"}},
		// A link where git looks for a submodule's git dir: git follows it anywhere.
		{newModule("docs/evil") + ` && ` + plant + ` > docs/evil/config && ln -s ../../docs/evil .git/modules/lnk`, []string{".git/modules/lnk"}},
		{newModule("docs/evil") + ` && ln -s ../../../docs/evil .git/modules/vendor/lnk`, []string{".git/modules/vendor/lnk"}},
		{`git worktree add -q wt && ` + newModule("docs/evil") + ` && ` + plant + ` > docs/evil/config && mkdir docs/m && ln -s ../evil docs/m/x && ` +
			`ln -s ../../../docs/m .git/worktrees/wt/modules`, []string{".git/worktrees/wt/modules"}},
		// More new names than the look's bounds: the new ones go whole.
		{`mkdir -p .git/modules/many && cd .git/modules/many && mkdir $(seq 1 600)`, []string{".git/modules/many"}},
		// Moved while the call runs, then looked at again as the call ends: moved once.
		{`mkdir -p .git/modules/many && cd .git/modules/many && mkdir $(seq 1 600) && sleep 1.2`, []string{".git/modules/many"}},
		// What git submodule and git worktree write.
		{`mkdir lib && git init -q --bare .git/modules/lib && git --git-dir=.git/modules/lib config core.bare false && ` +
			`git --git-dir=.git/modules/lib config core.worktree ../../../lib`, nil},
		{`git worktree add -q wt && git -C wt status --short`, nil},
	} {
		f := newProtectFixture(t)
		// The user's own submodules, one with a hook and a config that runs code.
		old, vendored := filepath.Join(f.repo, ".git/modules/old"), filepath.Join(f.repo, ".git/modules/vendor/foo")
		for _, m := range []string{old, vendored} {
			os.MkdirAll(filepath.Join(m, "objects"), 0o755)
			os.MkdirAll(filepath.Join(m, "refs"), 0o755)
			os.WriteFile(filepath.Join(m, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
		}
		os.WriteFile(filepath.Join(old, "config"), []byte("[core]\n\tfsmonitor = the-users-own\n"), 0o644)
		os.WriteFile(filepath.Join(vendored, "config"), []byte("[core]\n\tbare = false\n"), 0o644)
		os.MkdirAll(filepath.Join(old, "hooks"), 0o755)
		os.WriteFile(filepath.Join(old, "hooks", "post-checkout"), []byte("#!/bin/sh\n"), 0o755)
		if got := movedInRepo(t, s, f, tc.script); !slices.Equal(got, tc.moved) {
			t.Errorf("case %d: moved aside %v, want %v", i, got, tc.moved)
		}
		for _, p := range []string{"config", "hooks/post-checkout"} {
			if _, err := os.Lstat(filepath.Join(old, p)); err != nil {
				t.Errorf("case %d: the user's own submodule lost its %s: %v", i, p, err)
			}
		}
	}
}

// TestRebaseTodoExecMovedAside: a rebase in progress keeps its to-do list writable (git rewrites
// it at each step), but an exec line the call adds there runs, unconfined, at the user's next
// `git rebase --continue`: the list goes aside. Rewriting it otherwise (git's own steps, the
// user's exec lines kept) leaves it.
func TestRebaseTodoExecMovedAside(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	const todo = ".git/rebase-merge/git-rebase-todo"
	for i, tc := range []struct {
		script string
		moved  []string
	}{
		{`echo 'exec touch PWNED' >> ` + todo, []string{todo}},
		{`printf 'x\ttouch PWNED\n' >> ` + todo, []string{todo}},
		{`printf '  exec  touch PWNED\r\n' >> ` + todo, []string{todo}},
		{`mkdir -p .git/sequencer && printf 'pick 1234 a\nexec touch PWNED\n' > .git/sequencer/todo`, []string{".git/sequencer/todo"}},
		{`mkdir -p .git/worktrees/wt/rebase-merge && echo 'exec touch PWNED' > .git/worktrees/wt/rebase-merge/git-rebase-todo`,
			[]string{".git/worktrees/wt/rebase-merge/git-rebase-todo"}},
		{`head -c 2000000 /dev/zero | tr '\0' '#' >> ` + todo, []string{todo}},
		{`ln -s /etc/passwd t && mv t ` + todo, []string{todo}},
		// The strategy git runs (git merge-<name>: a path with a /) and its options.
		{`echo ../x > .git/rebase-merge/strategy`, []string{".git/rebase-merge/strategy"}},
		{`echo -Xours > .git/rebase-merge/strategy_opts`, []string{".git/rebase-merge/strategy_opts"}},
		{`mkdir -p .git/sequencer && printf '[options]\n\tstrategy = ../x\n' > .git/sequencer/opts`, []string{".git/sequencer/opts"}},
		// A submodule rebases on its own.
		{`mkdir -p .git/modules/sub/rebase-merge && echo 'ref: refs/heads/main' > .git/modules/sub/HEAD && ` +
			`echo 'exec touch PWNED' > .git/modules/sub/rebase-merge/git-rebase-todo`, []string{".git/modules/sub/rebase-merge/git-rebase-todo"}},
		// What git does: a step done, the user's own exec lines kept, the user's strategy kept.
		{`sed -i 1d ` + todo, nil},
		{`printf 'exec make test\npick 5678 b\n' > ` + todo, nil},
		{`echo '# exec touch PWNED' >> ` + todo + ` && echo 'pick 9abc c' >> ` + todo, nil},
	} {
		f := newProtectFixture(t)
		rm := filepath.Join(f.repo, ".git", "rebase-merge")
		os.MkdirAll(rm, 0o755)
		os.WriteFile(filepath.Join(rm, "git-rebase-todo"), []byte("pick 1234 a\nexec make test\npick 5678 b\n"), 0o644)
		os.WriteFile(filepath.Join(rm, "strategy"), []byte("ours\n"), 0o644)
		if got := movedInRepo(t, s, f, tc.script); !slices.Equal(got, tc.moved) {
			t.Errorf("case %d (%s): moved aside %v, want %v", i, tc.script, got, tc.moved)
		}
	}
}

// TestNewModuleInSeparateGitDirMadeSafe: a repository whose .git is a file naming a git dir
// inside the project (git init --separate-git-dir) gets the same look at the submodule git
// dirs a call makes in it.
func TestNewModuleInSeparateGitDirMadeSafe(t *testing.T) {
	t.Parallel()
	needGit(t)
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	sep := filepath.Join(f.home, "sep")
	hostGit(t, f.home, "init", "-q", "--separate-git-dir", filepath.Join(sep, "gitstore"), sep)
	chownR(t, sep)
	const plant = `printf '[core]\n\tfsmonitor = touch PWNED; false\n'`
	script := `mkdir -p gitstore/modules/lib/objects gitstore/modules/lib/refs && echo 'ref: refs/heads/main' > gitstore/modules/lib/HEAD && ` +
		plant + ` > gitstore/modules/lib/config && echo done`
	sp := f.spec(script, sep, sep)
	sp.ProtectedPaths = ProtectedCandidates(sp.WritableDirs, sep, f.home)
	sp.ProtectedPatterns = ProtectedPatterns(sp.WritableDirs, sep)
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%v %q", err, out)
	}
	if want := []string{filepath.Join(sep, "gitstore/modules/lib/config")}; !slices.Equal(res.MovedAside, want) {
		t.Errorf("moved aside %v, want %v", res.MovedAside, want)
	}
}

// movedInRepo runs script in f's repository, as its owner, with the repository's protected
// paths and sweeps, and returns what the call had moved aside, relative to the repository and
// sorted.
func movedInRepo(t *testing.T, s *Sandbox, f *protectFixture, script string) []string {
	t.Helper()
	chownR(t, f.repo)
	sp := f.spec(script+" && echo done", f.repo, f.repo)
	sp.ProtectedPatterns = ProtectedPatterns(sp.WritableDirs, sp.Dir)
	sp.Env = append(sp.Env, "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b")
	sp.MoveAsideCreated, sp.Call = true, "c1"
	res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
	if err != nil || !strings.Contains(out, "done") {
		t.Fatalf("%s: %v %q", script, err, out)
	}
	var moved []string
	for _, m := range res.MovedAside {
		rel, _ := filepath.Rel(f.repo, m)
		moved = append(moved, rel)
	}
	return slices.Sorted(slices.Values(moved))
}

// TestRunStateInSeparateGitDir: the rebase state of a repository whose .git file names a git
// dir in another writable dir, or one reached through a link, is held to the same check.
func TestRunStateInSeparateGitDir(t *testing.T) {
	t.Parallel()
	needGit(t)
	s := newTestSandbox(t, Config{})
	for _, viaLink := range []bool{false, true} {
		f := newProtectFixture(t)
		proj, store := filepath.Join(f.home, "proj"), filepath.Join(f.home, "store")
		os.MkdirAll(store, 0o755)
		hostGit(t, f.home, "init", "-q", "--separate-git-dir", filepath.Join(store, "real.git"), proj)
		gitdir := filepath.Join(store, "real.git")
		if viaLink {
			os.Symlink("real.git", filepath.Join(store, "l.git"))
			gitdir = filepath.Join(store, "l.git")
		}
		os.WriteFile(filepath.Join(proj, ".git"), []byte("gitdir: "+gitdir+"\n"), 0o644)
		rm := filepath.Join(store, "real.git", "rebase-merge")
		os.MkdirAll(rm, 0o755)
		os.WriteFile(filepath.Join(rm, "git-rebase-todo"), []byte("pick 1234 a\n"), 0o644)
		chownR(t, f.home)
		// Older than the call, as a user's link is: one changed at its start counts as its.
		time.Sleep(50 * time.Millisecond)
		sp := f.spec("echo 'exec touch PWNED' >> "+filepath.Join(gitdir, "rebase-merge", "git-rebase-todo")+" && echo done", proj, proj, store)
		sp.MoveAsideCreated, sp.Call = true, "c1"
		res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("link %v: %v %q", viaLink, err, out)
		}
		if want := []string{filepath.Join(rm, "git-rebase-todo")}; !slices.Equal(res.MovedAside, want) {
			t.Errorf("link %v: moved aside %v, want %v", viaLink, res.MovedAside, want)
		}
	}
}
