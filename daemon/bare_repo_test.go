package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBareRepositoryAsSessionDir: a session dir that is itself a git dir (a bare repository,
// as the cwd or an added dir) has its config and hooks kept from the call as a .git dir's are:
// git runs them on the user's next push or command there, outside any sandbox.
func TestBareRepositoryAsSessionDir(t *testing.T) {
	f := newTrustFixture(t, "sbbare")
	bare := filepath.Join(f.u.Home, "bare.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", bare).CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v %s", err, out)
	}
	os.RemoveAll(filepath.Join(bare, "hooks"))
	exec.Command("chown", "-R", fmt.Sprintf("%d:%d", f.u.UID, f.u.GID), bare).Run()
	config, _ := os.ReadFile(filepath.Join(bare, "config"))
	script := `import os
for p in ["con"+"fig", "hoo"+"ks/post-receive", "info/attri"+"butes"]:
    try:
        os.makedirs(os.path.dirname(p) or ".", exist_ok=True)
        open(p, "a").write("[alias]\n\tx = !touch /tmp/pwned\n"); print("WROTE", p)
    except OSError:
        pass`
	for _, args := range [][]string{{"--cwd", bare}, {"--add-dir", bare}} {
		id := f.session(t, append([]string{"--mode", "bypassPermissions"}, args...)...)
		cmd := "cd " + bare + " && python3 -c '" + strings.ReplaceAll(script, "'", `'\''`) + "'"
		out, errOut, code := f.sbctl(t, "bash", "--session", id, "--", cmd)
		if code != 0 || strings.Contains(out, "WROTE config") {
			t.Errorf("%v: exit %d, the bare repository's config was written or the call did not run:\n%s%s", args, code, out, errOut)
		}
		f.unchanged(t, filepath.Join(bare, "config"), string(config))
		for _, rel := range []string{"hooks/post-receive", "info/attributes"} {
			if _, err := os.Lstat(filepath.Join(bare, rel)); err == nil {
				t.Errorf("%v: %s was left for git to run or read", args, rel)
			}
		}
	}
}
