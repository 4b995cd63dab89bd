package classifier

import (
	"path"
	"strings"
)

// find's grammar, as the path facts and the risks both need it: the options before the roots
// (-H, -L, -P, -D LIST, -OLEVEL, and -- that ends them), the roots up to the first expression
// word, and whether the expression removes what it finds.

// findRootsStart is the index of find's first root in vals (its words past the name).
func findRootsStart(vals []string) int {
	start := 0
	for start < len(vals) {
		v := vals[start]
		if v == "-H" || v == "-L" || v == "-P" || strings.HasPrefix(v, "-O") {
			start++
			continue
		}
		if v == "-D" {
			start += 2
			continue
		}
		if v == "--" {
			start++
		}
		break
	}
	return min(start, len(vals))
}

// findRootsEnd is the index past find's last root: the first word that starts the expression.
func findRootsEnd(vals []string, start int) int {
	for i := start; i < len(vals); i++ {
		if v := vals[i]; strings.HasPrefix(v, "-") || v == "(" || v == "!" {
			return i
		}
	}
	return len(vals)
}

// findRemoves reports whether find's expression removes what it finds: -delete, or a command
// it runs on each (-exec, -execdir, -ok, -okdir) that removes or moves files.
func findRemoves(vals []string) bool {
	for i, v := range vals {
		switch v {
		case "-delete":
			return true
		case "-exec", "-execdir", "-ok", "-okdir":
			if i+1 < len(vals) {
				switch baseName(vals[i+1]) {
				case "rm", "rmdir", "unlink", "shred", "mv":
					return true
				}
			}
		}
	}
	return false
}

// findSelects reports whether find's expression picks files by a test on their name, time,
// size, owner, ... (`find . -name '*.pyc' -delete`), rather than taking all of them, or all of
// one type, as `find ~ -delete` and `find . -type f -delete` do.
// A negation or an alternative may take every file whatever its tests (find . ! -name zzz
// -delete), and a pattern of wildcards alone matches every name (-regex '.*', -path './*').
func findSelects(vals []string) bool {
	for i, v := range vals {
		switch v {
		case "!", "-not", "-o", "-or", ",":
			return false
		case "-delete", "-exec", "-execdir", "-ok", "-okdir":
			// Tests after the action (find . -delete -name x) pick nothing it removes.
			vals = vals[:i]
		}
		if len(vals) <= i {
			break
		}
	}
	for i, v := range vals {
		switch v {
		case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-lname", "-ilname":
			if i+1 < len(vals) && strings.Trim(vals[i+1], "*?./") != "" && !matchAll(path.Base(vals[i+1])) {
				return true
			}
		case "-regex", "-iregex":
			if i+1 < len(vals) && strings.Trim(vals[i+1], ".*+?^$/") != "" {
				return true
			}
		case "-newer", "-anewer", "-cnewer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin",
			"-size", "-empty", "-user", "-group", "-uid", "-gid", "-nouser", "-nogroup",
			"-inum", "-samefile", "-used":
			return true
		}
		if strings.HasPrefix(v, "-newer") {
			return true // -newerXY
		}
	}
	return false
}
