package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// TestCriticalRmThroughExistingLink: a link to the cwd made by an earlier call (ln -s . me)
// leads an rm's target there though no name of the line shows it. rm -rf me/, me/* and
// find me/ -delete are the cwd's critical removal, denied in bypassPermissions and asked for
// by an agent's hook alike; rm -rf me removes the link alone, and a link to a subdir is no
// critical path. So is a cd into such a link and an rm after it (cd me && rm -rf *); outside
// a sandbox a cd to a bare name may follow the agent's CDPATH, so the cwd is judged too.
func TestCriticalRmThroughExistingLink(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	for _, l := range []struct{ name, to string }{{"me", "."}, {"up", ".."}, {"sub", "build"}} {
		if err := os.Symlink(l.to, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A link a glob matches rather than a name (a cloned repository's, an earlier call's).
	if err := os.MkdirAll(filepath.Join(dir, "deep", "obj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(dir, "deep", "zz")); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	base := filepath.Base(dir)
	for _, unconfined := range []bool{false, true} {
		for cmd, critical := range map[string]bool{
			// A link on the way, not at the end: up/<cwd>, me/../<cwd>.
			"rm -rf up/" + base: true, "rm -rf me/../" + base: true, "rm -rf ./up/" + base: true, "find up/" + base + " -delete": true,
			"rm -rf up/" + base + "/build": false,
			"rm -rf me/":                   true, "rm -rf me/*": true, "rm -rf me/.": true, "find me/ -delete": true,
			"rm -rf up/": true, "rmdir me/": true, "rm -rf ./me/?*": true,
			"rm -rf me": false, "rm -f me": false, "rm -rf sub/": false, "rm -rf sub/*": false, "rm -rf build/": false,
			// A cd into such a link, and the command after it in the dir the link leads to.
			"cd me && rm -rf *": true, "cd up && rm -rf " + base: true, "cd ./up && rm -rf ./*": true, "cd me && find . -delete": true,
			"cd ./build && cd ../me && rm -rf *": true, "cd up/" + base + " && rm -rf *": true, "pushd me && rm -rf ?*": true,
			"cd me && rm -rf -- *": true, "cd me && find -delete": true, "cd me && rm -rf ../" + base: true, "cd me/ && rm -rf {*,.*}": true,
			"cd up && cd " + base + " && rm -rf *": true, "cd me && rm -rf ./": true,
			"find me/* -delete": true, "cd me && find * -delete": true, "find build/* -delete": false,
			"if cd me; then rm -rf *; fi": true, "if cd ./build; then rm -rf *; fi": false,
			"cd me || exit 1; rm -rf *": true, "cd ./build || exit; rm -rf *": false,
			// Every entry of the dir a link leads to, fed to rm by xargs.
			"cd me && ls | xargs rm -rf": true, "ls me/ | xargs rm -rf": true, "cd me && echo * | xargs -n1 rm -rf": true,
			"cd ./build && ls | xargs rm -rf": false, "ls sub | xargs rm -rf": false,
			"cd ./sub && rm -rf *": false, "cd ./build && rm -rf *": false, "cd build/ && rm -rf * .[!.]*": unconfined,
			// Through a link a glob matches: deep/zz leads to the cwd.
			"rm -rf deep/*/": true, "rm -rf deep/*/*": true, "rm -rf deep/*/.": true, "rmdir deep/*/": true,
			"find deep/*/ -delete": true, "rm -rf deep/z?/" + base[:1] + "*": false, "rm -rf deep/*": false, "rm -rf deep/o*/": false,
		} {
			res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), unconfined)
			// Run by its caller, a whole tree removed over a path the sandbox hides is refused
			// before the critical check sees it (TestTreeWritesUnderDenyRules).
			denied := behavior(res) == permission.Deny && (res.Decision.Step == "critical_rm" ||
				unconfined && res.Decision.Step == "facts" && strings.Contains(res.Decision.Reason, "writes everything under"))
			if denied != critical {
				t.Errorf("%q (unconfined %v): %s at %s, critical %v: %s", cmd, unconfined, res.Decision.Behavior, res.Decision.Step, critical, res.Decision.Reason)
			}
		}
	}
}

// A command its caller runs itself (sbctl hook without --confine) that removes, moves or
// hard-links a whole dir, or copies over one, reaches every file below it: where a Read or
// Edit deny rule names one, it is refused, as a whole-tree read is. Confined, the kernel
// holds those files (hidden, read-only), and the same commands are decided as before.
func TestTreeWritesUnderDenyRules(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	// repo/ is a repository; repo/sub/.git an empty dir git passes over, as an archive can make.
	for _, d := range []string{"src/locked", "secret", "build", "new", "repo/.git", "repo/sub/.git"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"src/locked/f.txt", "secret/key.txt", ".env", "a.txt", "build/x.o", "repo/.git/HEAD"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(./.env)","Read(./secret/**)","Edit(./src/locked/**)","Edit(./repo/locked/**)"]}}`, dir))
	for cmd, reaches := range map[string]bool{
		"cp -al . copy": true, "cp -rl src src2": true, "cp -r --link src src2": true, "mv src src3": true,
		"mv -t build src": true, "rm -rf src": true, "rm -r ./src/": true, "find src -delete": true,
		"cp -r new/. src/": true, "cp -a new/. src": true, "mv secret s2": true, "rm -rf secret": true,
		"rm -rf build": false, "cp a.txt src/": false, "mv a.txt b.txt": false, "cp -r src src9": false,
		"find build -delete": false, "cp -al build b2": false, "rm src/x": false,
		// git's own moves and removals, a copy into a dir itself, find running a writer,
		// modes changed below, rsync onto a dir.
		"git mv secret/key.txt k": true, "git mv .env e2": true, "git rm -rq secret": true, "git clean -fdxq secret": true,
		"git clean -fdx": true, "git restore src/locked/f.txt": true, "git checkout -- src": true, "cd src && git rm -rq locked": true,
		"cp -rT new src": true, "cp -r --no-target-directory new src": true, "find src -type f -exec sed -i s/a/b/ {} +": true,
		"find src -name f.txt -exec cp a.txt {} ;": true, "chmod -R a+w src": true, "chmod -R a+rwX .": true, "rsync -a new/ src/": true,
		"git mv a.txt b.txt": false, "git clean -fdx build": false, "find src -name x -exec cat {} +": false, "chmod -R a+w build": false,
		"rsync -a new/ build/":        false,
		"setfacl -R -m u:nobody:rX .": true, "setfacl -Rm o::r src": true, "setfacl --recursive --modify=u:nobody:r .": true,
		"chacl -r u::rwx,g::r-x,o::r-x src": true, "setfacl -m u:nobody:r build/x.o": false,
		// Unpackers write what the archive or patch names, below where they unpack; git
		// rewrites its whole worktree, from its top, which may be above the cwd.
		"tar xf a.tar": true, "tar -xzf a.tgz -C src": true, "tar --extract --file=a.tar": true, "bsdtar -xf a.tar": true,
		"tar xf a.tar -C build": false, "tar czf a.tgz build": false, "unzip a.zip": true, "unzip -o a.zip -d src": true,
		"unzip -q a.zip -d build": false, "unzip -l a.zip": false, "patch -p1 -i x.diff": true, "patch -p1 < x.diff": true,
		"patch -d build -p1 -i x.diff": false, "cpio -idm < a.cpio": true, "7z x a.7z": true, "7z x a.7z -obuild": false,
		"ar x lib.a": true, "dpkg-deb -x a.deb src": true, "dpkg-deb -x a.deb build": false,
		"git checkout main": true, "git switch main": true, "git reset --hard": true, "git stash": true, "git stash pop": true,
		"git merge topic": true, "git pull": true, "git apply x.diff": true, "git am x.patch": true, "git cherry-pick abc": true,
		"git rebase main": true, "git reset HEAD~1": false, "git stash list": false, "git apply --check x.diff": false,
		"cd build && git checkout main": true, "cd repo/sub && git checkout main": true, "cd repo/sub && git reset --hard": true,
		"git worktree add src/locked/wt topic": true, "git worktree add -b t2 src/wt": false, "git worktree add build/wt topic": false,
		// A dir moved or copied onto a name lands whole there (new/ holds a file).
		"mv new src/locked": true, "mv new src/locked/": true, "cp -r new src/locked/x": true, "mv -T new src/locked": true,
		"mv a.txt src/locked2": false, "mv build b9": false,
		"git clone /tmp/r src/locked/x": true, "git clone ../r.git src": true, "git clone /tmp/r build/x": false,
		"git init src/locked/x": true, "git init build/x": false, "git init": false, "python3 -m zipfile -e a.zip src": true,
	} {
		for _, unconfined := range []bool{true, false} {
			res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), unconfined)
			// Run by its caller, a command that reaches below is denied (by the tree check, or
			// by a rule on the path it names), and one that does not is allowed; confined, the
			// tree check never refuses.
			refused := behavior(res) == permission.Deny
			if !unconfined {
				refused = refused && strings.Contains(res.Decision.Reason, "everything under")
			}
			if want := reaches && unconfined; refused != want {
				t.Errorf("%q (unconfined %v): %s at %s, want refused %v: %s", cmd, unconfined, res.Decision.Behavior, res.Decision.Step, want, res.Decision.Reason)
			}
		}
	}
	// From a dir below the repository's top (an agent that did cd repo/sub), git rewrites the
	// worktree from the top git finds, past the empty .git of repo/sub.
	sub := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Edit(/%s/repo/locked/**)"]}}`, filepath.Join(dir, "repo/sub"), dir))
	for _, cmd := range []string{"git checkout main", "git reset --hard", "git stash pop"} {
		res := td.decideBy(t, sub.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		if behavior(res) != permission.Deny || !strings.Contains(res.Decision.Reason, "everything under "+filepath.Join(dir, "repo")+",") {
			t.Errorf("%q in repo/sub: %s at %s, want refused from the repository's top: %s", cmd, res.Decision.Behavior, res.Decision.Step, res.Decision.Reason)
		}
	}
}

// A whole-tree read or write of a path with nothing below it (a file that is no directory, or
// a name that does not exist read by a line that makes nothing: a revision) is no tree a rule
// below could meet: `git log -p README.md` and `mv a.md b.md` under `Read(**/.env)` are decided
// as the paths they name, while a directory, or a name a writing line may make, is still held.
func TestTreeUsesOfFilesAndRevisions(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a.md", "src/x.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(**/.env)","Edit(.github/**)"]}}`, dir))
	for cmd, refused := range map[string]bool{
		"mv a.md b.md": false, "git log -p a.md": false, "git blame src/x.go": false, "git diff main": false,
		"git stash list": false, "git show HEAD": false, "diff -u a.md src/x.go": false, "grep -r x a.md": false,
		"grep -r x src": true, "mv src s2": true, "cp -r src s3": true, "rm -rf src": true,
		// A line that writes may make the name before the read: held as before.
		"mkdir -p nd && grep -r x nd": true,
	} {
		res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		got := behavior(res) == permission.Deny && strings.Contains(res.Decision.Reason, "everything under")
		if got != refused {
			t.Errorf("%q: %s at %s, want refused by the tree check %v: %s", cmd, res.Decision.Behavior, res.Decision.Step, refused, res.Decision.Reason)
		}
	}
	// What an archive or a repository puts in place of .env shows nothing of it: a Read
	// rule alone does not hold git checkout or tar x, while what moves or packs the files
	// there (gzip -r makes .env.gz) is held as before.
	s = td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(./.env)"]}}`, dir))
	for cmd, refused := range map[string]bool{
		"git checkout main": false, "git pull": false, "git stash pop": false, "tar xzf d.tgz": false, "unzip a.zip": false,
		"gzip -r .": true, "cp -al . ../copy": true,
	} {
		res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		got := behavior(res) == permission.Deny && strings.Contains(res.Decision.Reason, "everything under")
		if got != refused {
			t.Errorf("under Read(./.env), %q: %s at %s, want refused by the tree check %v: %s", cmd, res.Decision.Behavior, res.Decision.Step, refused, res.Decision.Reason)
		}
	}
}

// The agent's own Glob (run by its caller, no sandbox or filter) is refused where its pattern
// may list a name a Read deny rule covers, and allowed where none can; sandboxd's own Glob
// filters such names and is decided as before.
func TestAgentGlobUnderReadDenies(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "secret"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(./secret/**)","Read(./.env)","Read(./absent/**)","Read(**/*.pem)"]}}`, dir))
	for pattern, lists := range map[string]bool{
		"secret/*": true, "[s]ecret/*": true, "secre?/*": true, "*/key.txt": true, "**/key.txt": true,
		"**/*.go": true, "{src,secret}/*": true, ".env": true, ".e*": true, "!*.go": true, "**/x.pem": true,
		"@(secret)/*": true, "+(secret|x)/**": true, "*(secret)/key.txt": true,
		"secre[!x]/*": true, "[!x]ecret/*": true, `secret\/*`: true, "secret[/]*": true, ".en[!x]": true,
		"src/*": true, "src/**/*.ts": false, "src/*.go": false, "absent-not/*.go": false, "docs/*.md": false,
	} {
		for _, unconfined := range []bool{true, false} {
			res := td.decideBy(t, s.ID, "Glob", fmt.Sprintf(`{"pattern":%q}`, pattern), unconfined)
			refused := behavior(res) == permission.Deny && strings.Contains(res.Decision.Reason, "may list names")
			if want := lists && unconfined; refused != want {
				t.Errorf("Glob %q (unconfined %v): %s at %s, want refused %v: %s", pattern, unconfined, res.Decision.Behavior, res.Decision.Step, want, res.Decision.Reason)
			}
		}
	}
}

// decideBy decides a call of tool in session id, as run by its caller itself (unconfined) or
// in sandboxd, and fails the test unless a decision comes back.
func (td *testDaemon) decideBy(t *testing.T, id, tool, input string, unconfined bool) protocol.CallResult {
	t.Helper()
	code, b := td.do(t, "POST", "/v1/sessions/"+id+"/decide", callBody(tool, input, fmt.Sprintf(`,"unconfined":%v`, unconfined)))
	var res protocol.CallResult
	decodeInto(t, b, &res)
	if code != 200 || res.Decision == nil {
		t.Fatalf("%s %s (unconfined %v): %d %s", tool, input, unconfined, code, b)
	}
	return res
}

// Run by its caller, a command that writes a protected file or one a deny rule covers under a
// name it makes or takes from an option is denied in bypassPermissions (which never asks) as a
// named write is: find -fprintf .git/config plants git's fsmonitor, gunzip .envrc.gz direnv's
// script, git reflog --output ~/.bashrc a shell's start-up.
func TestUnseenWritesDecided(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Edit(./.github/**)","Read(./.env)"]}}`, dir))
	for cmd, denied := range map[string]bool{
		"find . -maxdepth 0 -fprintf .git/config x": true, "xxd a.md .github/x.yml": true, "xxd -r -p h .envrc": true,
		"tree -o .vscode/tasks.json": true, "git reflog -p --output=" + dir + "/.bashrc": true,
		"git stash show -p --output .git/hooks/pre-commit": true, "git checkout-index -f --prefix=.git/hooks/ x": true,
		"gunzip .envrc.gz": true, "gzip -S rc .bash": true, "gzip -r .": true,
		// Run in another dir, a command's relative paths are not the line's.
		"git submodule foreach cat ../.env": true, "git submodule foreach 'echo x > ../.github/ci.yml'": true,
		"find . -execdir cat ../../.env ';'": true, "find . -name '*.md' -print": false,
		"xxd a.md": false, "find . -fls out.txt": false, "gzip -k notes.txt": false, "gunzip -k a.log.gz": false,
		"git diff": false, "tree -o tree.txt": false,
	} {
		res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		if got := behavior(res) == permission.Deny; got != denied {
			t.Errorf("%q: %s at %s, want denied %v: %s", cmd, res.Decision.Behavior, res.Decision.Step, denied, res.Decision.Reason)
		}
	}
}

// Run by its caller, a copy or move of a tree plants what the tree holds where it lands: a
// tpl/ holding .git/hooks/pre-commit and .envrc, copied into the project, plants a hook and
// direnv's script, which acceptEdits asks about as it asks about writing them by name; a tree
// with nothing under a protected name copies as before.
func TestTreeCopiesPlantWhatTheyHold(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	for _, d := range []string{"tpl/.git/hooks", "src/pkg", "x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"tpl/.git/hooks/pre-commit", "tpl/.envrc", "src/pkg/a.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"acceptEdits"}`, dir))
	for cmd, asked := range map[string]bool{
		"cp -r tpl/. .": true, "cp -rT tpl .": true, "cp -a tpl/. x/": true, "cp -r tpl newproj": true,
		"mv tpl newproj": true, "mv tpl x/": true, "cp -r --target-directory=x tpl": true,
		"rsync -a tpl/ ./": true, "rsync -a src tpl x/": true, "cp --parents tpl/.git/hooks/pre-commit x": true, "cp --parents src/pkg/a.go x": false,
		"cp -r src src2": false, "mv src x/": false, "cp -a src/. x/": false, "rsync -a src/ x/": false,
	} {
		res := td.decideBy(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd), true)
		if got := behavior(res) == permission.Ask && res.Decision.Step == "protected_path"; got != asked {
			t.Errorf("%q: %s at %s, want asked about a protected path %v: %s", cmd, res.Decision.Behavior, res.Decision.Step, asked, res.Decision.Reason)
		}
	}
	// A tree too large to look through plants what is known only when it runs: asked.
	big := filepath.Join(dir, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 20_001 {
		f, err := os.Create(filepath.Join(big, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	res := td.decideBy(t, s.ID, "Bash", `{"command":"cp -r big big2"}`, true)
	if behavior(res) != permission.Ask || res.Decision.Step != "bash_paths_unknown" {
		t.Errorf("a copy of a tree too large to look through: %s at %s: %s", res.Decision.Behavior, res.Decision.Step, res.Decision.Reason)
	}
}
