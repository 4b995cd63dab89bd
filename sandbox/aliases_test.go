package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAliases(t *testing.T) {
	tab := parseMountinfo([]byte(`22 1 8:1 / / rw - ext4 /dev/vda1 rw
23 22 8:1 /var/tmp /mnt/alias rw - ext4 /dev/vda1 rw
24 22 8:3 / /mnt/alias/x rw - tmpfs tmpfs rw
25 22 8:1 / /mnt/twice rw - ext4 /dev/vda1 rw
26 22 8:2 / /srv/data rw - ext4 /dev/vdb rw
27 22 8:1 /home/a\040b /mnt/sp rw - ext4 /dev/vda1 rw
28 22 0:4 net:[4026531840] /run/netns/x rw - nsfs nsfs rw
`))
	for _, c := range []struct {
		p    string
		want []string
	}{
		{"/var/tmp/u/ws/secrets", []string{"/mnt/alias/u/ws/secrets", "/mnt/twice/var/tmp/u/ws/secrets"}},
		// Through a bind, back to the original and the other places.
		{"/mnt/alias/u/k", []string{"/var/tmp/u/k", "/mnt/twice/var/tmp/u/k"}},
		// /mnt/alias/x shows another file system: not an alias of /var/tmp/x.
		{"/var/tmp/x/k", []string{"/mnt/twice/var/tmp/x/k"}},
		{"/var/tmp", []string{"/mnt/alias", "/mnt/twice/var/tmp"}},
		{"/var", []string{"/mnt/twice/var"}},
		{"/home/a b/.ssh", []string{"/mnt/twice/home/a b/.ssh", "/mnt/sp/.ssh"}},
		{"/srv/data/f", nil},
		{"", nil},
		{"relative/x", nil},
		{"/mnt/alias/x/f", nil},
	} {
		got := aliases(tab, c.p)
		slices.Sort(got)
		slices.Sort(c.want)
		if !slices.Equal(got, c.want) {
			t.Errorf("aliases(%s) = %q, want %q", c.p, got, c.want)
		}
	}
	// Dirs mounted onto themselves (systemd's hardening makes dozens) show nothing twice.
	self := parseMountinfo([]byte("22 1 8:1 / / rw - ext4 /dev/vda1 rw\n23 22 8:1 /home /home rw - ext4 /dev/vda1 rw\n" +
		"24 22 8:1 /var/lib/x /var/lib/x rw - ext4 /dev/vda1 rw\n"))
	if len(self.shared) != 0 || aliases(self, "/home/u/.ssh") != nil {
		t.Errorf("self-binds: shared %v, aliases %q; want none", self.shared, aliases(self, "/home/u/.ssh"))
	}
	al := &aliasLookup{tab: tab}
	if got := al.withAliases([]string{"/var/tmp/k", "/mnt/alias/k"}); len(got) != 3 || got[0] != "/var/tmp/k" || got[1] != "/mnt/alias/k" {
		t.Errorf("withAliases: %q, want the two then /mnt/twice/var/tmp/k once", got)
	}
}

// FuzzMountinfo: any table and path parse and look up without a panic, and a path is never
// its own alias.
func FuzzMountinfo(f *testing.F) {
	f.Add([]byte("22 1 8:1 / / rw - ext4 /dev/vda1 rw\n23 22 8:1 /var/tmp /mnt/alias rw - ext4 /dev/vda1 rw\n"), "/var/tmp/u/.ssh")
	f.Add([]byte("27 22 8:1 /home/a\\040b /mnt/sp rw - ext4 x rw\n28 22 8:1 / / rw - ext4 x rw\n"), "/home/a b/x")
	f.Add([]byte("1 1 0:1 / / rw\n2 1 0:1 / //x rw\n"), "//x/y")
	f.Fuzz(func(t *testing.T, b []byte, p string) {
		tab := parseMountinfo(b)
		for _, a := range aliases(tab, p) {
			if a == p {
				t.Fatalf("%q is its own alias", p)
			}
		}
		al := &aliasLookup{tab: tab}
		al.withAliases([]string{p})
		al.staleIn(parseMountinfo([]byte("1 1 9:9 / / rw\n")))
	})
}

// TestStaleIn: a pooled init's copy of an older table is stale for a plan only when it shows
// a path the plan looked up at a place the plan's table does not.
func TestStaleIn(t *testing.T) {
	const base = "22 1 8:1 / / rw - ext4 /dev/vda1 rw\n"
	old := parseMountinfo([]byte(base + "23 22 8:1 /var/tmp /mnt/alias rw - ext4 /dev/vda1 rw\n" +
		"24 22 8:1 /srv/x /srv/x rw - ext4 /dev/vda1 rw\n"))
	now := parseMountinfo([]byte(base))
	for _, c := range []struct {
		asked []string
		old   *mountTab
		want  bool
	}{
		{[]string{"/var/tmp/u/.ssh"}, old, true},  // the bind that showed it is gone
		{[]string{"/home/u/.ssh"}, old, false},    // it showed nothing the plan hides
		{[]string{"/srv/x/.ssh"}, old, false},     // a bind onto itself shows nothing elsewhere
		{[]string{"/var/tmp/u/.ssh"}, now, false}, // the same table
		{[]string{"/var/tmp/u/.ssh"}, parseMountinfo([]byte(base)), false},
	} {
		al := &aliasLookup{tab: now}
		al.withAliases(c.asked)
		if got := al.staleIn(c.old); got != c.want {
			t.Errorf("asked %v: staleIn = %v, want %v", c.asked, got, c.want)
		}
	}
}

// newAliasFixture is a protect fixture whose repository holds secrets/key, with its home bound
// (a bind mount) at the returned dir as well, until the test ends.
func newAliasFixture(t *testing.T) (*protectFixture, string) {
	t.Helper()
	f := newProtectFixture(t)
	os.MkdirAll(filepath.Join(f.repo, "secrets"), 0o755)
	os.WriteFile(filepath.Join(f.repo, "secrets", "key"), []byte("KEY-1\n"), 0o644)
	chownR(t, f.repo)
	alias := hostTempDir(t, "/var/tmp", "sbx-alias-")
	os.Chmod(alias, 0o755)
	if err := unix.Mount(f.home, alias, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(alias, unix.MNT_DETACH) })
	return f, alias
}

// TestHiddenWhereverItShows: a deny path, an Edit-protected path and a protected path made
// during the call are hidden, read-only or moved aside also where a bind mount of the home
// shows them again, a writable session dir included.
func TestHiddenWhereverItShows(t *testing.T) {
	t.Parallel()
	f, alias := newAliasFixture(t)
	os.MkdirAll(filepath.Join(f.repo, "q"), 0o755)
	os.WriteFile(filepath.Join(f.repo, "q", ".env"), []byte("KEY-2\n"), 0o644)
	chownR(t, f.repo)
	// After the mount: a pooled init holds a copy of the mount table as it was when it started.
	s := newTestSandbox(t, Config{})
	a := func(rel string) string { return filepath.Join(alias, rel) }
	reads := `cat ` + a("repo/README") + `; cat ` + a("repo/secrets/key") + ` ` + a("repo/q/.env") + ` 2>/dev/null; ` +
		`ls ` + a("repo/secrets") + ` 2>/dev/null; `
	// A deny path outside the writable dirs that the owner makes while the call runs stays
	// unreadable (landlock) through the bind too.
	later := `touch started; for i in $(seq 200); do [ -e ` + a(".aws/creds") + ` ] && break; sleep 0.02; done; ` +
		`cat ` + a(".aws/creds") + ` 2>/dev/null || echo later-denied; `
	for _, tc := range []struct {
		name     string
		writable []string
		script   string
	}{
		{"repository writable", []string{f.repo}, reads + later + `echo x >> ` + a("repo/.git/config") + `; echo done`},
		{"the bind a session dir too", []string{f.repo, alias}, reads +
			`for p in repo/.git/config repo/.envrc .bashrc .ssh/authorized_keys; do echo x >> ` + alias + `/$p; done; ` +
			`mkdir -p ` + a("repo/.claude") + ` && echo '{}' > ` + a("repo/.claude/settings.json") + `; ` +
			`mkdir ` + a(".bashrc.d") + ` && echo id > ` + a(".bashrc.d/x.sh") + `; echo done`},
	} {
		sp := f.spec(tc.script, f.repo, tc.writable...)
		sp.ProtectedPaths = ProtectedCandidates(tc.writable, f.repo, f.home)
		sp.DenyPaths = []string{filepath.Join(f.repo, "secrets"), filepath.Join(f.home, ".aws", "creds")}
		sp.HidePatterns = []string{"/**/.env"}
		sp.MoveAsideCreated = true
		sp.Call = "c1"
		made := make(chan struct{})
		go func() {
			defer close(made)
			for i := 0; i < 400 && strings.Contains(tc.script, "touch started"); i++ {
				if _, err := os.Stat(filepath.Join(f.repo, "started")); err == nil {
					os.MkdirAll(filepath.Join(f.home, ".aws"), 0o755)
					os.WriteFile(filepath.Join(f.home, ".aws", "creds"), []byte("KEY-3\n"), 0o644)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		<-made
		if err != nil || !strings.Contains(out, "hello\n") || !strings.Contains(out, "done") {
			t.Fatalf("%s: %v %q, want the bind's README read and the script done", tc.name, err, out)
		}
		if strings.Contains(out, "KEY-") || strings.Contains(tc.script, "later-denied") && !strings.Contains(out, "later-denied") {
			t.Errorf("%s: a hidden file read through the bind:\n%s", tc.name, out)
		}
		f.unchanged(t)
		for _, p := range []string{"repo/.claude", ".bashrc.d"} {
			if _, err := os.Lstat(filepath.Join(f.home, p)); err == nil {
				t.Errorf("%s: %s made through the bind was not moved aside (MovedAside %v)", tc.name, p, res.MovedAside)
			}
		}
		os.RemoveAll(filepath.Join(f.home, ".aws"))
		os.Remove(filepath.Join(f.repo, "started"))
	}
}

// TestMountTableRereads: the table is read again when the kernel reports a change, and only
// then, and no sooner than minReread after its last read.
func TestMountTableRereads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	mt, err := newMountTable()
	if err != nil {
		t.Fatal(err)
	}
	defer mt.close()
	dir := hostTempDir(t, "/var/tmp", "sbx-reread-")
	get := func() *mountTab {
		t.Helper()
		tab, err := mt.get()
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	t0 := get()
	if t1 := get(); t1 != t0 {
		t.Error("an unchanged table was read again")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	if t2 := get(); t2 != t0 {
		t.Error("a change was read again sooner than minReread after the last read")
	}
	time.Sleep(minReread)
	if t2 := get(); t2 == t0 || !slices.ContainsFunc(t2.all, func(m mountEntry) bool { return m.point == dir }) {
		t.Errorf("a mount added: the table was not read again, or lacks it")
	}
}

// TestStalePoolInitNotUsed: a pooled init started while a bind mount existed holds a copy of
// it; once the bind is gone, that init either is not used (the plan read the table again and
// found the bind gone) or the plan, on the table it read before, still covers the bind's place
// (as what the original path is, the host showing nothing there now).
func TestStalePoolInitNotUsed(t *testing.T) {
	t.Parallel()
	for _, reread := range []bool{true, false} {
		f, alias := newAliasFixture(t)
		s := newTestSandbox(t, Config{})
		warm := f.spec("true", f.repo, f.repo)
		warm.Call = "c0"
		if _, _, err := run(t, s, ctxTimeout(t, 20*time.Second), warm); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !slices.ContainsFunc(readyInits(s), func(in *poolInit) bool { return in.uid == nobody }) {
			if time.Now().After(deadline) {
				t.Fatal("no pooled init for the caller after 10 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := unix.Unmount(alias, 0); err != nil {
			t.Fatal(err)
		}
		s.mounts.mu.Lock()
		if reread {
			s.mounts.read = time.Time{} // the next plan reads the change
		} else {
			s.mounts.read = time.Now().Add(time.Hour) // and here it plans on the table it has
		}
		s.mounts.mu.Unlock()
		sp := f.spec(`cat `+filepath.Join(alias, "repo/secrets/key")+` 2>&1; echo done`, f.repo, f.repo)
		sp.DenyPaths = []string{filepath.Join(f.repo, "secrets")}
		sp.Call = "c1"
		_, out, err := run(t, s, ctxTimeout(t, 20*time.Second), sp)
		if err != nil || !strings.Contains(out, "done") {
			t.Fatalf("reread %v: %v %q", reread, err, out)
		}
		if strings.Contains(out, "KEY-1") {
			t.Errorf("reread %v: a pooled init started before the bind went showed it:\n%s", reread, out)
		}
	}
}
