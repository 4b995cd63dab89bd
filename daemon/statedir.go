package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// prepareStateDir makes the state directory root-owned and not listable by others: users
// reach their own persisted results by exact path only.
func prepareStateDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("state dir %q must be absolute", dir)
	}
	// Before anything is made or changed there: the daemon removes what tool-results holds at
	// every start, so a state dir a user can rename entries in would be a root rm -rf.
	if err := checkTrustedDir(dir, false, true); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{
		{dir, 0o711}, {filepath.Join(dir, "tool-results"), 0o711},
		// The running calls' sweep journals (sandbox.Config.JournalDir) name the protected
		// paths of users' projects: root's alone.
		{filepath.Join(dir, journalDirName), 0o700},
	} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("create state dir: %w", err)
		}
		if err := checkTrustedDir(d.path, false, false); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("chmod state dir: %w", err)
		}
	}
	return nil
}

// journalDirName is the state directory's dir of sweep journals.
const journalDirName = "sweeps"

// lockStateDir takes the state directory for this daemon: two daemons on one would write one
// audit log's hash chain from two ends, and each would remove the other's sessions' results
// at start (removeLeftoverResults). The lock is the kernel's (flock), so it goes with the
// process, however it ends; the file stays.
func lockStateDir(dir string) (*os.File, error) {
	f, busy, err := tryLock(filepath.Join(dir, "sandboxd.lock"))
	switch {
	case busy:
		return nil, fmt.Errorf("another sandboxd uses the state directory %s (its audit log and results); give this one another --state-dir", dir)
	case err != nil:
		return nil, fmt.Errorf("lock state dir: %w", err)
	}
	return f, nil
}

// tryLock opens path (made 0600 if missing, never through a symlink) and takes an exclusive
// flock on it without waiting; busy says another process holds it.
func tryLock(path string) (f *os.File, busy bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, errors.Is(err, syscall.EWOULDBLOCK), err
	}
	return f, false, nil
}

// removeLeftoverResults removes what tool-results holds at start: the persisted outputs of
// sessions of an earlier daemon, which a restart ends (sessions live in memory). A clean stop
// removes its sessions' results itself; a crashed daemon's stayed for good. Called with the
// state directory locked, so no live daemon's sessions are among them. Entries are removed,
// never followed (os.RemoveAll does not follow symlinks; the directory is root's, 0711).
func removeLeftoverResults(stateDir string) (int, error) {
	root := filepath.Join(stateDir, "tool-results")
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0, err
	}
	var errs []error
	n := 0
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
