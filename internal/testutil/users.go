package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// User is a throwaway Unix user made for a test.
type User struct {
	Name     string
	UID, GID uint32
	Home     string
}

// CreateUser makes a system user with a home directory under t.TempDir() and removes it
// when the test ends. It needs root.
func CreateUser(t testing.TB, prefix string) User {
	t.Helper()
	RequireRoot(t)
	name := fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)
	if len(name) > 31 {
		name = name[:31]
	}
	home := t.TempDir()
	// t.TempDir's parent is 0700: let the user reach its home.
	for _, d := range []string{filepath.Dir(home), home} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_ = exec.Command("userdel", name).Run() // a leftover of a killed run
	if out, err := exec.Command("useradd", "--system", "--user-group", "--home-dir", home, "--shell", "/bin/bash", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if err := os.Chown(home, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: home}
}
