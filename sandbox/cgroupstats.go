package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupStats are the figures a Result reports.
type cgroupStats struct {
	peakMemory, cpuNanos int64
	oomKilled, pidsLimit bool
}

func parseInt(s string) int64 {
	v, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return v
}

// parseKV returns the value of key in a "key value" per line text.
func parseKV(s, key string) int64 {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// The files stats reads, by index into statPaths.
const (
	statPeak = iota
	statCPU
	statOOM
	statPids
	numStats
)

func (cg *cgroup) statPaths() [numStats]string {
	if cg.v2 {
		d := cg.dirs[""]
		return [numStats]string{filepath.Join(d, "memory.peak"), filepath.Join(d, "cpu.stat"),
			filepath.Join(d, "memory.events"), filepath.Join(d, "pids.events")}
	}
	return [numStats]string{filepath.Join(cg.dirs["memory"], "memory.max_usage_in_bytes"),
		filepath.Join(cg.dirs["cpuacct"], "cpuacct.usage"),
		filepath.Join(cg.dirs["memory"], "memory.oom_control"),
		filepath.Join(cg.dirs["pids"], "pids.events")}
}

// openStats opens the statistics files, and the one empty reads, ahead of the call's end.
// Not cgroup.procs: its reader keeps a position across reads and does not start over.
func (cg *cgroup) openStats() error {
	empty := filepath.Join(cg.dirs["pids"], "pids.current")
	if cg.v2 {
		empty = filepath.Join(cg.dirs[""], "cgroup.events")
	}
	paths := cg.statPaths()
	for i, p := range append(paths[:], empty) {
		// Opened blocking, as os.NewFile then leaves them out of the poller (cgroup files
		// are pollable, and os.Open would register each one), so preadAll is one pread.
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open cgroup statistics: %w", err)
		}
		f := os.NewFile(uintptr(fd), p)
		if i < numStats {
			cg.statFiles[i] = f
		} else {
			cg.emptyFile = f
		}
	}
	return nil
}

// preadAll reads f from offset 0; each of these cgroup files is generated afresh by that.
// ok is false when nothing could be read.
func preadAll(f *os.File) (s string, ok bool) {
	var buf [1024]byte
	var n int
	var err error
	for {
		// One pread: os.File.ReadAt would read again until EOF. Every file read so holds
		// far less than buf.
		n, err = unix.Pread(int(f.Fd()), buf[:], 0)
		if err != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(f)
	if n <= 0 || err != nil {
		return "", false
	}
	return string(buf[:n]), true
}

// readStat returns the content of statistics file i, "" when it cannot be read.
func (cg *cgroup) readStat(i int, path string) string {
	if f := cg.statFiles[i]; f != nil {
		s, _ := preadAll(f)
		return s
	}
	b, _ := os.ReadFile(path)
	return string(b)
}

func (cg *cgroup) stats() cgroupStats {
	paths := cg.statPaths()
	var raw [numStats]string
	for i, p := range paths {
		raw[i] = cg.readStat(i, p)
	}
	st := cgroupStats{
		peakMemory: parseInt(raw[statPeak]),
		oomKilled:  parseKV(raw[statOOM], "oom_kill") > 0,
		pidsLimit:  parseKV(raw[statPids], "max") > 0,
	}
	if cg.v2 {
		st.cpuNanos = parseKV(raw[statCPU], "usage_usec") * 1000
	} else {
		st.cpuNanos = parseInt(raw[statCPU])
	}
	return st
}
