// Package cgroupfs reads where this process sits in the cgroup hierarchies, where they are
// mounted and which processes a subtree holds, and thaws a frozen subtree.
package cgroupfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Own parses /proc/self/cgroup: controller -> path ("" for the v2 entry).
func Own() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read own cgroup: %w", err)
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, nil
}

// Mounts maps each v1 controller to its mount point and "" to the cgroup2 mount.
func Mounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+4 || len(fields) < 5 {
			continue
		}
		switch fields[sep+1] {
		case "cgroup2":
			m[""] = fields[4]
		case "cgroup":
			for _, o := range strings.Split(fields[sep+3], ",") {
				m[o] = fields[4]
			}
		}
	}
	return m, sc.Err()
}

// ProcsUnder lists the pids in the cgroup dir and all its descendants.
func ProcsUnder(dir string) []int {
	var pids []int
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range bytes.Fields(b) {
			if pid, err := strconv.Atoi(string(f)); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// ThawTree writes thawed to the freezer state file stateName (v1: "freezer.state", "THAWED";
// v2: "cgroup.freeze", "0") of dir and of every cgroup below it. Thawing a cgroup does not thaw
// a child that was frozen itself (v1's self_freezing), and on v1 a SIGKILLed task stays in the
// freezer until its own cgroup thaws: a subtree killed after a daemon died between a freeze and
// its thaw holds such children. A cgroup removed meanwhile is skipped.
func ThawTree(dir, stateName, thawed string) error {
	var firstErr error
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		f, err := os.OpenFile(filepath.Join(path, stateName), os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(thawed)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) && firstErr == nil {
			firstErr = fmt.Errorf("thaw %s: %w", path, err)
		}
		return nil
	})
	return firstErr
}

// V1Controllers are the hierarchies sandboxd uses on v1 and hybrid hosts. freezer is what
// makes a kill atomic; cpuacct gives cpu_time_ms.
var V1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// V1Dirs maps each of V1Controllers to <its mount>/<this process's cgroup>/<name>.
func V1Dirs(name string) (map[string]string, error) {
	own, err := Own()
	if err != nil {
		return nil, err
	}
	mounts, err := Mounts()
	if err != nil {
		return nil, err
	}
	dirs := map[string]string{}
	for _, c := range V1Controllers {
		mnt, ok := mounts[c]
		if !ok {
			return nil, fmt.Errorf("cgroup v1 controller %s not mounted", c)
		}
		dirs[c] = filepath.Join(mnt, own[c], name)
	}
	return dirs, nil
}

// V2Dir is this process's cgroup directory in the cgroup2 hierarchy; atRoot says it is the
// hierarchy's root.
func V2Dir() (dir string, atRoot bool, err error) {
	own, err := Own()
	if err != nil {
		return "", false, err
	}
	mounts, err := Mounts()
	if err != nil {
		return "", false, err
	}
	mnt, ok := mounts[""]
	if !ok {
		return "", false, errors.New("no cgroup2 mount")
	}
	return filepath.Join(mnt, own[""]), own[""] == "/", nil
}
