// Package regfile reads files as regular files of a bounded size, without blocking on anything
// else put at their names: the daemon's own (its config, the admin's policy files and keys),
// and the user's configs it reads as the user (git's) for what they name.
package regfile

import (
	"fmt"
	"io"
	"os"
	"syscall"
)

// Read reads the regular file at path (a link followed), of at most max bytes. Anything else
// is refused without blocking: these reads run where the daemon takes its signals, and a FIFO
// at the path held it (SIGTERM unheard) until someone wrote to it, /dev/zero without end.
func Read(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is a %s, not a regular file", path, typeName(fi.Mode()))
	case fi.Size() > max:
		return nil, fmt.Errorf("%s holds %d bytes, over the %d read", path, fi.Size(), max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, fmt.Errorf("%s grew past the %d bytes read", path, max)
	}
	return b, err
}

func typeName(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSocket != 0:
		return "socket"
	case m.IsDir():
		return "directory"
	}
	return "non-regular file"
}
