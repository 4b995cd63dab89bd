// Package durable writes the files a root daemon must find again after a crash of itself or
// of the host: created exclusively and without following a link (nothing planted is written
// through), synced, and put in place by a rename whose directory is synced too.
package durable

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// CreateExcl creates path (mode 0600) for flag's access; it fails if anything, a symlink
// included, is already there.
func CreateExcl(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Base(path), err)
	}
	return f, nil
}

// SyncDir makes a create, rename or remove in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// WriteFile replaces path with data (mode 0600) durably: a temporary file beside it, synced,
// renamed over it, and the directory synced. A reader sees the old content or the new, never
// a part.
func WriteFile(path string, data []byte) error {
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a leftover from a crash; O_EXCL below refuses anything planted meanwhile
	f, err := CreateExcl(tmp, os.O_WRONLY)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = unix.Fdatasync(int(f.Fd()))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return SyncDir(filepath.Dir(path))
}
