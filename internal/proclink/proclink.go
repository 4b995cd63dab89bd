package proclink

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks is the kernel's bound on the links one lookup follows.
const maxLinks = 40

// Target returns the path clean (absolute and clean) names, its links followed one by one up to
// the first whose target lies under /proc or /dev/fd (/proc/self/cwd, /dev/fd/3, /dev/stdin),
// with the rest of the path after that target; "" when no link on its way leads there. A
// lookup by the worker or the daemon takes /proc/self as itself, not as the program that opens
// the path later: the decision must see the /proc name, not where it led for the looker.
func Target(clean string) string {
	if opener(clean) {
		return "" // named there, not led there: the caller sees the name itself
	}
	rest := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > maxLinks {
			return ""
		}
		t, err := os.Readlink(next)
		if err != nil {
			return ""
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(cur, t)
		}
		t = filepath.Clean(t)
		if opener(t) {
			return filepath.Join(append([]string{t}, rest...)...)
		}
		rest = append(strings.Split(strings.TrimPrefix(t, "/"), "/"), rest...)
		cur = "/"
	}
	return ""
}

// opener reports a path whose meaning is the opening process's: under /proc, /dev/fd, or one
// of the standard streams' names.
func opener(p string) bool {
	for _, d := range []string{"/proc", "/dev/fd"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return p == "/dev/stdin" || p == "/dev/stdout" || p == "/dev/stderr"
}
