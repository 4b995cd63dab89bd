package sandbox

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestPartialClone: a repository whose config names a promisor remote, or sets
// extensions.partialClone, through a .git dir, a .git file or a worktree's common dir, is a
// partial clone to the caller; a plain repository or none is not, and a config the caller
// cannot read counts as one.
func TestPartialClone(t *testing.T) {
	testutil.RequireRoot(t)
	root := t.TempDir()
	for _, d := range []string{root, filepath.Dir(root)} {
		os.Chmod(d, 0o755) // nobody looks at what it holds
	}
	mk := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk("plain/.git/HEAD", "ref: refs/heads/main\n")
	mk("plain/.git/config", "[core]\n\tbare = false\n")
	mk("plain/src/x", "")
	mk("blobless/.git/HEAD", "ref: refs/heads/main\n")
	mk("blobless/.git/config", "[remote \"origin\"]\n\turl = https://example.com/r.git\n\tpromisor = true\n\tpartialclonefilter = blob:none\n")
	mk("ext/.git/HEAD", "ref: refs/heads/main\n")
	mk("ext/.git/config", "[extensions]\n\tpartialClone = origin\n")
	mk("sub/.git", "gitdir: ../blobless/.git\n")
	mk("wt/.git", "gitdir: "+filepath.Join(root, "blobless/.git/worktrees/wt")+"\n")
	mk("blobless/.git/worktrees/wt/HEAD", "ref: refs/heads/x\n")
	mk("blobless/.git/worktrees/wt/commondir", "../..\n")
	mk("secret/.git/HEAD", "ref: refs/heads/main\n")
	mk("secret/.git/config", "[core]\n")
	os.Chmod(filepath.Join(root, "secret/.git/config"), 0o600)
	os.MkdirAll(filepath.Join(root, "none/a"), 0o755)
	for dir, want := range map[string]bool{
		"plain/src": false, "blobless": true, "ext": true, "sub": true, "wt": true, "secret": true, "none/a": false,
	} {
		if got := PartialClone(nobody, nobody, nil, filepath.Join(root, dir)); got != want {
			t.Errorf("%s: partial clone %v, want %v", dir, got, want)
		}
	}
}
