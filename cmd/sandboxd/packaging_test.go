package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

const repoRoot = "../.."

// The units, tmpfiles and sysusers snippets pass systemd's own checks. systemd-analyze needs
// no running systemd; the unit's ExecStart must name an executable, so it is pointed at this
// test binary.
func TestUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian: apt-get install systemd); the units are unchecked")
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"sandboxd.service", "sandboxd.socket"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "/usr/bin/sandboxd", self))
		if err := os.WriteFile(filepath.Join(dir, u), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(analyze, "verify", "sandboxd.socket", "sandboxd.service")
	cmd.Dir = dir
	// verify prints warnings and still exits 0 for some of them: any output is a finding.
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	root := t.TempDir()
	checks := []struct {
		name string
		args []string
	}{
		{"systemd-tmpfiles", []string{"--create", "--root=" + root, abs(t, "systemd/sandboxd.tmpfiles.conf")}},
		{"systemd-sysusers", []string{"--root=" + root, abs(t, "systemd/sandboxd.sysusers.conf")}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			bin, err := exec.LookPath(c.name)
			if err != nil {
				t.Skipf("%s not installed", c.name)
			}
			if out, err := exec.Command(bin, c.args...).CombinedOutput(); err != nil || strings.Contains(string(out), "rror") {
				t.Fatalf("%s: %v\n%s", c.name, err, out)
			}
		})
	}
	if fi, err := os.Stat(filepath.Join(root, "var/lib/sandboxd")); err != nil || fi.Mode().Perm() != 0o711 {
		t.Errorf("tmpfiles: /var/lib/sandboxd: %v %v, want mode 0711", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/group")); !strings.Contains(string(b), "sandboxd-admin:") && os.Geteuid() == 0 {
		t.Errorf("sysusers: no sandboxd-admin in etc/group:\n%s", b)
	}
}

func abs(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// `make deb` builds a package with the binaries, units, snippets and config where Debian
// expects them, and maintainer scripts; with DEB_TEST=1 as root it also installs and removes
// it on this machine (and leaves nothing behind: purged, the group it made deleted).
func TestDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three binaries; skipped with -short")
	}
	for _, tool := range []string{"dpkg-deb", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: cannot build the package", tool)
		}
	}
	bin := t.TempDir()
	out, err := exec.Command("make", "-C", repoRoot, "--no-print-directory", "deb", "BIN="+bin).CombinedOutput()
	if err != nil {
		t.Fatalf("make deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(bin, "sandboxd_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("want one .deb in %s, got %v\n%s", bin, debs, out)
	}
	deb := debs[0]
	info, err := exec.Command("dpkg-deb", "--info", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --info: %v\n%s", err, info)
	}
	for _, want := range []string{"Package: sandboxd", "Depends: libc6, libseccomp2", "postinst", "prerm", "postrm", "conffiles"} {
		if !strings.Contains(string(info), want) {
			t.Errorf("dpkg-deb --info lacks %q:\n%s", want, info)
		}
	}
	contents, err := exec.Command("dpkg-deb", "--contents", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb --contents: %v\n%s", err, contents)
	}
	for _, want := range []string{
		`-rwxr-xr-x root/root .* \./usr/bin/sandboxd$`, `-rwxr-xr-x root/root .* \./usr/bin/sbctl$`,
		`-rwxr-xr-x root/root .* \./usr/bin/sbctl-full$`,
		`-rw-r--r-- root/root .* \./usr/lib/systemd/system/sandboxd\.service$`,
		`-rw-r--r-- root/root .* \./usr/lib/systemd/system/sandboxd\.socket$`,
		`\./usr/lib/tmpfiles\.d/sandboxd\.conf$`, `\./usr/lib/sysusers\.d/sandboxd\.conf$`,
		`-rw-r--r-- root/root .* \./etc/sandboxd/sandboxd\.yaml$`, `\./usr/share/doc/sandboxd/README\.md$`,
		// README links docs/*.md, and the pages each other: all are installed beside it.
		`\./usr/share/doc/sandboxd/docs/operations\.md$`, `\./usr/share/doc/sandboxd/docs/configuration\.md$`,
	} {
		if !regexp.MustCompile(`(?m)` + want).Match(contents) {
			t.Errorf("dpkg-deb --contents lacks %s:\n%s", want, contents)
		}
	}
	// Each unit's Documentation= pages are in the package: `systemctl help` opens them.
	for _, unit := range []string{"sandboxd.service", "sandboxd.socket"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, "systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`file:(/\S+)`).FindAllSubmatch(b, -1) {
			if !regexp.MustCompile(`(?m) \.` + regexp.QuoteMeta(string(m[1])) + `$`).Match(contents) {
				t.Errorf("%s names %s as its documentation; the package lacks it", unit, m[1])
			}
		}
	}
	if os.Getenv("DEB_TEST") != "1" {
		t.Log("DEB_TEST=1 (as root) also installs and removes the package on this machine")
		return
	}
	testutil.RequireRoot(t)
	if err := exec.Command("dpkg", "-s", "sandboxd").Run(); err == nil {
		t.Skip("sandboxd is installed on this machine; not touching it")
	}
	hadGroup := exec.Command("getent", "group", "sandboxd-admin").Run() == nil
	_, err = os.Stat("/var/lib/sandboxd")
	hadState := err == nil
	t.Cleanup(func() {
		_ = exec.Command("dpkg", "-P", "sandboxd").Run()
		if !hadGroup {
			_ = exec.Command("groupdel", "sandboxd-admin").Run()
		}
		if !hadState {
			_ = os.Remove("/var/lib/sandboxd") // only if empty: the package keeps audit logs
		}
	})
	if out, err := exec.Command("dpkg", "-i", deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	if err := exec.Command("getent", "group", "sandboxd-admin").Run(); err != nil {
		t.Error("postinst made no sandboxd-admin group")
	}
	if _, err := os.Stat("/etc/systemd/system/sockets.target.wants/sandboxd.socket"); err != nil && hasSystemctl() {
		t.Errorf("postinst did not enable the socket: %v", err)
	}
	if out, err := exec.Command("/usr/bin/sandboxd", "--log-level", "bogus").CombinedOutput(); err == nil || !strings.Contains(string(out), "log-level") {
		t.Errorf("installed sandboxd does not run: %v\n%s", err, out)
	}
	if out, err := exec.Command("dpkg", "-r", "sandboxd").CombinedOutput(); err != nil {
		t.Fatalf("dpkg -r: %v\n%s", err, out)
	}
	for _, p := range []string{"/usr/bin/sandboxd", "/usr/lib/systemd/system/sandboxd.service", "/etc/systemd/system/sockets.target.wants/sandboxd.socket"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after dpkg -r", p)
		}
	}
}

func hasSystemctl() bool {
	_, err := exec.LookPath("systemctl")
	return err == nil
}
