package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// On-disk names. Log files are named by the seq of their first record, zero-padded so that
// lexical order is chain order.
const (
	filePrefix = "audit-"
	fileSuffix = ".jsonl"
	tornInfix  = ".torn-"
	headFile   = "head.json"
	keyFile    = "audit.key"
	pubFile    = "audit.pub"
	probeFile  = ".probe"
)

func fileName(firstSeq uint64) string {
	return fmt.Sprintf("%s%020d%s", filePrefix, firstSeq, fileSuffix)
}

// fileFirstSeq is the first seq a log file's name says it holds.
func fileFirstSeq(path string) (uint64, bool) {
	digits := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), filePrefix), fileSuffix)
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

func isLogFile(name string) bool {
	return strings.HasPrefix(name, filePrefix) && strings.HasSuffix(name, fileSuffix) && !strings.Contains(name, tornInfix)
}

// ListFiles returns the log files of dir in chain order (full paths).
func ListFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list audit dir: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && isLogFile(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// scanLines calls fn for every complete line of r (without its newline) with the line's byte
// offset. It returns the offset just past the last complete line and the bytes after it (a
// torn or still-being-written last line).
func scanLines(r io.Reader, fn func(line []byte, off int64) error) (good int64, tail []byte, err error) {
	br := bufio.NewReaderSize(r, 256<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if ferr := fn(line[:len(line)-1], good); ferr != nil {
				return good, nil, ferr
			}
			good += int64(len(line))
			continue
		}
		if errors.Is(err, io.EOF) {
			return good, line, nil
		}
		if err != nil {
			return good, nil, fmt.Errorf("read audit file: %w", err)
		}
	}
}

// openRead opens a log file for reading without following a symlink planted in its place.
func openRead(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open audit file: %w", err)
	}
	return f, nil
}

// secureDir creates dir 0700 or checks an existing one: a real directory owned by us, and
// tightened to 0700 because the log holds commands and inputs of every user.
func secureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create audit dir: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("stat audit dir: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory: %w", dir, ErrInsecureDir)
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%s: owned by uid %d: %w", dir, st.Uid, ErrInsecureDir)
	}
	if st.Mode&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("tighten audit dir: %w", err)
		}
	}
	return nil
}

// lastLine returns the last complete line of path, its offset, and the torn bytes after it.
func lastLine(path string) (last []byte, good int64, tail []byte, first []byte, err error) {
	f, err := openRead(path)
	if err != nil {
		return nil, 0, nil, nil, err
	}
	defer f.Close()
	good, tail, err = scanLines(f, func(line []byte, _ int64) error {
		if first == nil {
			first = bytes.Clone(line)
		}
		last = append(last[:0], line...)
		return nil
	})
	return last, good, tail, first, err
}
