package sandbox

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// aclXattr is a system.posix_acl_access value: the owner's rwx, one named user's perm, and
// the group, the mask and others at base (r-x for a dir, r-- for a file): the mode's bits
// say nothing of the named user's write.
func aclXattr(user uint32, perm, base uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range []struct {
		tag, perm uint16
		id        uint32
	}{{aclUserObj, 7, 0xffffffff}, {aclUser, perm, user}, {aclGroupObj, base, 0xffffffff}, {aclMask, base, 0xffffffff}, {aclOther, base, 0xffffffff}} {
		b = binary.LittleEndian.AppendUint16(b, e.tag)
		b = binary.LittleEndian.AppendUint16(b, e.perm)
		b = binary.LittleEndian.AppendUint32(b, e.id)
	}
	return b
}

// TestOwnedAlone: a settings file is the caller's alone only if no one else may change it
// or a name on the way to it from its project's dir: in a team's shared dir a group-writable
// file or dir of the caller's is anyone's in the group to rewrite, as another user's link or
// dir is theirs. Above the project's dir nothing counts; a sticky dir only for the caller's
// entries; where a link leads counts as the link does.
func TestOwnedAlone(t *testing.T) {
	testutil.RequireRoot(t)
	base := hostTempDir(t, "/var/tmp", "sbx-alone-")
	// The caller's, so that a target outside a project may be looked at up to / (/var/tmp
	// is sticky: only an entry of the caller's counts there).
	os.Chown(base, nobody, nobody)
	os.Chmod(base, 0o755)
	const other = 4242
	aclOK := true
	for i, tc := range []struct {
		name string
		// setup gets the project's dir, its .sandboxd and the settings file in it, all the
		// caller's (0755, 0755, 0644), and changes them.
		setup func(proj, dir, file string)
		owner uint32
		why   string // "" for the caller's alone, else part of the reason
	}{
		{"the caller's alone", func(proj, dir, file string) {}, nobody, ""},
		{"file writable by its group", func(_, _, f string) { os.Chmod(f, 0o664) }, nobody, "settings.json is writable by group 65534 (mode 0664)"},
		{"file writable by others", func(_, _, f string) { os.Chmod(f, 0o646) }, nobody, "settings.json is writable by others (mode 0646)"},
		{"dir writable by its group", func(_, d, _ string) { unix.Chmod(d, 0o2775) }, nobody, ".sandboxd is writable by group 65534 (mode 2775)"},
		{"project's dir writable by others", func(p, _, _ string) { unix.Chmod(p, 0o757) }, nobody, "proj is writable by others (mode 0757)"},
		{"project's dir sticky, entry the caller's", func(p, _, _ string) { unix.Chmod(p, 0o1777) }, nobody, ""},
		{"project's dir sticky, entry root's", func(p, d, _ string) { unix.Chmod(p, 0o1777); os.Chown(d, 0, 0) }, nobody, ""},
		{"a dir root's", func(_, d, _ string) { os.Chown(d, 0, 0) }, nobody, ""},
		// Above it as much as below: others may rename the project away and theirs in.
		{"above the project's dir writable", func(p, _, _ string) { unix.Chmod(filepath.Dir(p), 0o777) }, nobody, "and others (mode 0777)"},
		{"above the project's dir writable, sticky", func(p, _, _ string) { unix.Chmod(filepath.Dir(p), 0o1777) }, nobody, ""},
		{"file another's", func(_, _, f string) { os.Chown(f, other, other) }, other, "is uid 4242's"},
		{"file root's", func(_, _, f string) { os.Chown(f, 0, 0) }, 0, "is uid 0's"},
		{"dir another's", func(_, d, _ string) { os.Chown(d, other, other) }, other, ".sandboxd is uid 4242's"},
		{"project's dir another's", func(p, _, _ string) { os.Chown(p, other, other) }, other, "is uid 4242's"},
		{"link another's", func(_, d, f string) {
			os.Rename(f, filepath.Join(d, "notes.json"))
			os.Symlink("notes.json", f)
			unix.Lchown(f, other, other)
		}, other, "settings.json is uid 4242's"},
		{"link to the caller's file in a group-writable dir", func(p, _, f string) {
			shared := filepath.Join(p, "shared")
			os.Mkdir(shared, 0o755)
			os.Chown(shared, nobody, nobody)
			unix.Chmod(shared, 0o2775)
			os.Rename(f, filepath.Join(shared, "s.json"))
			os.Symlink("../shared/s.json", f)
			unix.Lchown(f, nobody, nobody)
		}, nobody, "shared is writable by group 65534 (mode 2775)"},
		// A link in the middle of the chain is judged as the first is: another's there picks
		// what the file is, whatever the caller's first link and last file.
		{"link to another's link to the caller's file", func(p, d, f string) {
			os.Rename(f, filepath.Join(d, "notes.json"))
			mid := filepath.Join(p, "mid")
			os.Symlink(filepath.Join(d, "notes.json"), mid)
			unix.Lchown(mid, other, other)
			os.Symlink(mid, f)
			unix.Lchown(f, nobody, nobody)
		}, other, "mid is uid 4242's"},
		{"link to a dir of another's link", func(p, d, f string) {
			os.Rename(f, filepath.Join(d, "notes.json"))
			mid := filepath.Join(p, "middir")
			os.Symlink(d, mid)
			unix.Lchown(mid, other, other)
			os.Symlink(filepath.Join(mid, "notes.json"), f)
			unix.Lchown(f, nobody, nobody)
		}, other, "middir is uid 4242's"},
		{"a .. after another's link", func(p, d, f string) {
			// The kernel follows m, then climbs from where it leads: the text's m/.. is d,
			// the file read is inner's, of another's choosing.
			inner := filepath.Join(p, "inner")
			os.MkdirAll(filepath.Join(inner, "x"), 0o755)
			os.Chown(inner, nobody, nobody)
			os.Chown(filepath.Join(inner, "x"), nobody, nobody)
			os.Rename(f, filepath.Join(inner, "settings.ok"))
			decoy := filepath.Join(d, "settings.ok") // what the text names: the caller's own
			os.WriteFile(decoy, []byte("{}"), 0o644)
			os.Chown(decoy, nobody, nobody)
			m := filepath.Join(d, "m")
			os.Symlink(filepath.Join(inner, "x"), m)
			unix.Lchown(m, other, other)
			os.Symlink("m/../settings.ok", f)
			unix.Lchown(f, nobody, nobody)
		}, other, "m is uid 4242's"},
		{"link to the caller's file in its own dir", func(p, _, f string) {
			os.Rename(f, filepath.Join(p, "s.json"))
			os.Symlink("../s.json", f)
			unix.Lchown(f, nobody, nobody)
		}, nobody, ""},
		{"link out of the project to a group-writable dir", func(p, _, f string) {
			out := filepath.Join(filepath.Dir(p), "out")
			os.Mkdir(out, 0o755)
			os.Chown(out, nobody, nobody)
			unix.Chmod(out, 0o775)
			os.Rename(f, filepath.Join(out, "s.json"))
			os.Symlink(filepath.Join(out, "s.json"), f)
			unix.Lchown(f, nobody, nobody)
		}, nobody, "out is writable by group 65534 (mode 0775)"},
		{"file with an ACL letting another user write", func(_, _, f string) {
			if err := unix.Setxattr(f, "system.posix_acl_access", aclXattr(other, 6, 4), 0); err != nil {
				aclOK = !errors.Is(err, unix.EOPNOTSUPP)
			}
		}, nobody, "has an ACL that lets user 4242 write it"},
		{"dir with an ACL letting another user write", func(_, d, _ string) {
			unix.Setxattr(d, "system.posix_acl_access", aclXattr(other, 7, 5), 0)
		}, nobody, ".sandboxd has an ACL that lets user 4242 write it"},
		{"file with an ACL letting another user read", func(_, _, f string) {
			unix.Setxattr(f, "system.posix_acl_access", aclXattr(other, 4, 4), 0)
		}, nobody, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := filepath.Join(base, string(rune('a'+i)))
			proj := filepath.Join(top, "proj")
			dir := filepath.Join(proj, ".sandboxd")
			file := filepath.Join(dir, "settings.json")
			os.MkdirAll(dir, 0o755)
			os.WriteFile(file, []byte("{}"), 0o644)
			for _, p := range []string{top, proj, dir, file} {
				mode := os.FileMode(0o755)
				if p == file {
					mode = 0o644
				}
				os.Chmod(p, mode)
				os.Chown(p, nobody, nobody)
			}
			tc.setup(proj, dir, file)
			if !aclOK {
				t.Skip("no POSIX ACLs on /var/tmp")
			}
			owner, why, err := OwnedAlone(nobody, nobody, nil, proj, file)
			if err != nil {
				t.Fatal(err)
			}
			if owner != tc.owner || (why == "") != (tc.why == "") || !strings.Contains(why, tc.why) {
				t.Errorf("owner %d, why %q; want %d, %q", owner, why, tc.owner, tc.why)
			}
		})
	}
	// A file the caller cannot look at is not shown to be its own.
	if _, why, err := OwnedAlone(nobody, nobody, nil, base, filepath.Join(base, "missing")); err != nil || !strings.Contains(why, "could not be looked at") {
		t.Errorf("a missing file: why %q, err %v", why, err)
	}
}

// TestOwnedAlonePrivateGroup: umask 002 on a system of user-private groups leaves a project
// writable by the user's own group, which no one else is in: still the user's alone. Add
// another user to that group and it is not.
func TestOwnedAlonePrivateGroup(t *testing.T) {
	u := testutil.CreateUser(t, "sbupg")
	proj := filepath.Join(u.Home, "proj")
	file := filepath.Join(proj, ".sandboxd", "settings.json")
	os.MkdirAll(filepath.Dir(file), 0o775)
	os.WriteFile(file, []byte("{}"), 0o664)
	for _, p := range []string{proj, filepath.Dir(file), file} {
		os.Chown(p, int(u.UID), int(u.GID))
		unix.Chmod(p, map[bool]uint32{true: 0o664, false: 0o2775}[p == file])
	}
	if privateGroup(nobody, nobody) {
		t.Error("nogroup, which services run as, taken for nobody's private group")
	}
	if _, why, err := OwnedAlone(u.UID, u.GID, nil, proj, file); err != nil || why != "" {
		t.Errorf("writable by the user's private group only: %q %v", why, err)
	}
	other := testutil.CreateUser(t, "sbupo")
	if out, err := exec.Command("gpasswd", "-a", other.Name, u.Name).CombinedOutput(); err != nil {
		t.Fatalf("gpasswd: %v %s", err, out)
	}
	if _, why, err := OwnedAlone(u.UID, u.GID, nil, proj, file); err != nil || !strings.Contains(why, "writable by group") {
		t.Errorf("with another user in the group: %q %v", why, err)
	}
}
