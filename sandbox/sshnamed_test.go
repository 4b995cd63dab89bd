package sandbox

import (
	"path/filepath"
	"slices"
	"testing"
)

// TestSSHNames: what an ssh config includes, runs or loads, in the forms ssh_config(5) takes:
// keyword case, `=`, quotes, ~ and %d, a relative Include (the user's ~/.ssh's), a glob (its
// dir), and the words of a shell line that name files.
func TestSSHNames(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	conf := `# comment
Include ~/dot/ssh/*.conf extra
include=%d/dot/one.conf
Host x
  ProxyCommand /usr/bin/nc -X connect %h %p
  proxycommand ~/dot/px.sh %h
  LocalCommand "~/dot/local.sh" arg
Match exec "~/dot/check.sh %h" host y
  PKCS11Provider ~/dot/lib.so
  KnownHostsCommand=/opt/k/khc %H
  IdentityFile ~/dot/id
Host z
  ProxyCommand $HOME/dot/h.sh;exit 1
  LocalCommand ${HOME}/dot/b.sh|cat
Match !exec "~/dot/neg.sh"
`
	writeFiles(t, map[string]string{filepath.Join(home, ".ssh", "config"): conf, filepath.Join(home, "dot", "one.conf"): "SecurityKeyProvider ~/dot/sk.so\n"})
	got, err := sshNamedPaths(home, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dot/ssh", ".ssh/extra", "dot/one.conf", "dot/px.sh", "dot/local.sh", "dot/check.sh", "dot/lib.so", "dot/sk.so",
		"dot/h.sh", "dot/b.sh", "dot/neg.sh"}
	for _, w := range want {
		if !slices.Contains(got, filepath.Join(home, w)) {
			t.Errorf("%s not among %v", w, got)
		}
	}
	for _, p := range []string{"/usr/bin/nc", "/opt/k/khc"} {
		if !slices.Contains(got, p) {
			t.Errorf("%s not among %v", p, got)
		}
	}
	if slices.Contains(got, filepath.Join(home, "dot/id")) {
		t.Errorf("an identity file is no code: %v", got)
	}
}

// TestSSHNamedPathsProtected: in a session rooted at a dotfiles repository, what the owner's
// ~/.ssh/config includes or runs from it is read-only, and a config a call adds where the
// config's Include glob looks is refused.
func TestSSHNamedPathsProtected(t *testing.T) {
	t.Parallel()
	const script = `d=ssh; ( echo 'Match exec "id"' > $d/x.conf ) 2>/dev/null && echo 'ATTACK-WORKED include glob'; ` +
		`( echo id >> p""x.sh ) 2>/dev/null && echo 'ATTACK-WORKED proxy command'; `
	attackNamed(t, map[string]string{
		".ssh/config":     "Include ~/repo/ssh/*.conf\nHost *\n  ProxyCommand ~/repo/px.sh %h %p\n",
		"repo/ssh/a.conf": "Host a\n", "repo/px.sh": "#!/bin/sh\n",
	}, script, "ssh/x.conf")
}

// FuzzSSHNames: any config parses without a panic and names only absolute, clean paths.
func FuzzSSHNames(f *testing.F) {
	for _, s := range []string{"Include ~/a/*.conf b\nProxyCommand ~/x %h\n", "Match exec \"~/c\"\nPKCS11Provider=/l.so\n", "include \"a b\" =\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := sshNames(b, "/home/u")
		for _, p := range slices.Concat(n.includes, n.named) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Fatalf("%q names %q", b, p)
			}
		}
	})
}
