package testutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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
	sweepOnce.Do(sweepStaleUsers)
	_ = exec.Command("userdel", name).Run() // a leftover of a killed run
	if out, err := exec.Command("useradd", "--system", "--user-group", "--home-dir", home, "--shell", "/bin/bash", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	t.Cleanup(func() { removeUser(name, int(uid)) })
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	if err := os.Chown(home, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	return User{Name: name, UID: uint32(uid), GID: uint32(gid), Home: home}
}

// removeUser deletes the user. userdel refuses a user that still has processes, and a test's
// daemon (stopped by a cleanup that runs after this one) may still hold the user's file
// worker or a background task: those are killed and userdel tried again, so no run leaves
// its users behind.
func removeUser(name string, uid int) {
	for range 50 {
		err := exec.Command("userdel", name).Run()
		var ee *exec.ExitError
		if err == nil || !errors.As(err, &ee) || ee.ExitCode() != 8 { // 8: the user is logged in
			return
		}
		killUserProcesses(uid)
		time.Sleep(20 * time.Millisecond)
	}
}

// killUserProcesses sends SIGKILL to every process whose real uid is uid.
func killUserProcesses(uid int) {
	for _, pid := range ProcessesOf(uint32(uid)) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// ProcessesOf lists the processes whose real uid is uid (as the host sees it: a confined
// call's, too).
func ProcessesOf(uid uint32) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" && f[1] == strconv.FormatUint(uint64(uid), 10) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

var sweepOnce sync.Once

// sweepStaleUsers removes the throwaway users of runs killed before their cleanup: a user whose
// home was a test's temporary directory (os.TempDir()/Test…) that no longer exists. A test's
// user is removed before its home (cleanups run last-registered first), so a live test's user
// always has its home. Left alone they use up the system range of uids and gids, and useradd
// then fails in every test that needs a user.
func sweepStaleUsers() {
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return
	}
	prefix := filepath.Join(os.TempDir(), "Test")
	for line := range strings.SplitSeq(string(passwd), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 7 || !strings.HasPrefix(f[5], prefix) {
			continue
		}
		if _, err := os.Stat(f[5]); errors.Is(err, fs.ErrNotExist) {
			_ = exec.Command("userdel", f[0]).Run()
		}
	}
}
