package classifier

import (
	"path"
	"slices"
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
// it runs on each (-exec, -execdir, -ok, -okdir) that removes or moves files, through any
// wrapper (-exec env rm), or one known only at run time (-exec /bin/r[m]).
// findExecWrites reports a find that runs a command on what it finds which may write it: any
// command but the readers below (find src -type f -exec sed -i … {} +, -exec cp x {} \;).
func findExecWrites(vals []string) bool {
	for i, v := range vals {
		switch v {
		case "-exec", "-execdir", "-ok", "-okdir":
			cmd := stripWrappers(vals[i+1:], true)
			if len(cmd) == 0 || !findReaders[baseName(cmd[0])] {
				return true
			}
		}
	}
	return false
}

// findReaders are the commands a find may run on what it finds without writing it.
var findReaders = map[string]bool{"cat": true, "grep": true, "egrep": true, "fgrep": true, "rg": true, "head": true,
	"tail": true, "ls": true, "stat": true, "file": true, "wc": true, "md5sum": true, "sha1sum": true,
	"sha256sum": true, "sha512sum": true, "echo": true, "printf": true, "test": true, "[": true,
	"basename": true, "dirname": true, "readlink": true, "realpath": true, "du": true, "diff": true, "cmp": true}

func findRemoves(vals []string) bool {
	for i, v := range vals {
		switch v {
		case "-delete":
			return true
		case "-exec", "-execdir", "-ok", "-okdir":
			cmd := stripWrappers(vals[i+1:], true)
			if len(cmd) == 0 {
				continue
			}
			if strings.ContainsAny(cmd[0], "*?[$`") {
				return true
			}
			if isShell(baseName(cmd[0])) && slices.ContainsFunc(cmd[1:], func(a string) bool {
				return strings.Contains(a, "rm") || strings.Contains(a, "unlink") || strings.Contains(a, "shred") || strings.Contains(a, "mv")
			}) {
				return true // -exec bash -c "rm -rf {}" \;: {} is what it found
			}
			switch baseName(cmd[0]) {
			case "rm", "rmdir", "unlink", "shred", "mv":
				return true
			}
		}
	}
	return false
}

// findSelects reports whether find's expression picks files by a test on their name, time,
// size, ... (`find . -name '*.pyc' -delete`), rather than taking all of them, or all of one
// type, as `find ~ -delete` and `find . -type f -delete` do. Each alternative (-o, `,`) must
// pick by a test of its own before any action (find . \( -name a -o -name b \) -delete, find
// . -path ./x -prune -o -name '*.map' -delete): one that picks none takes every file (find .
// -name x -delete -o -delete). A negated test picks none (find . ! -name zzz -delete), a
// pattern of wildcards alone matches every name (-regex '.*', -path './*'), and tests true of
// the user's own files (-user, -writable, -perm -0) pick nothing out of them.
func findSelects(vals []string) bool {
	selects, acted, negated := false, false, false
	for i, v := range vals {
		switch v {
		case "-o", "-or", ",":
			if !selects {
				return false
			}
			selects, acted, negated = false, false, false
			continue
		case "!", "-not":
			negated = true
			continue
		case "(", ")", "-a", "-and":
			continue
		case "-delete", "-exec", "-execdir", "-ok", "-okdir":
			// Tests after the action (find . -delete -name x) pick nothing it removes.
			acted = true
		}
		if !acted && !negated && findTestSelects(vals, i) {
			selects = true
		}
		if strings.HasPrefix(v, "-") {
			negated = false
		}
	}
	return selects
}

// findTestSelects reports whether the test at vals[i] picks some files only.
func findTestSelects(vals []string, i int) bool {
	arg := ""
	if i+1 < len(vals) {
		arg = vals[i+1]
	}
	switch vals[i] {
	case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-lname", "-ilname":
		return arg != "" && strings.Trim(arg, "*?./") != "" && !matchAll(path.Base(arg))
	case "-regex", "-iregex":
		return arg != "" && regexSelects(arg)
	case "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-size", "-used":
		// +N (older, larger) picks some, but +0 nearly all; -N (newer, smaller) may be
		// every file (-mtime -100000, -size -100G).
		return strings.HasPrefix(arg, "+") && strings.Trim(strings.TrimRight(arg[1:], "bcwkMG"), "0") != ""
	case "-inum":
		// One inode; +N and -N are ranges (-inum +0: every file).
		return arg != "" && !strings.ContainsAny(arg[:1], "+-")
	case "-empty", "-nouser", "-nogroup", "-samefile":
		return true
	}
	// -newer FILE and -newerXY take every file newer than a time, which may be any.
	return false
}

// regexSelects reports whether a find regex needs a character of its own in every path it
// matches (`.*\.pyc`), so it does not take every file. Alternatives, groups and intervals
// (`.*|x`, `.\{0,\}`) may match anything, and so does a regex of wildcards, bracket
// expressions and optional characters alone (`.*x*`, `[^x]*`).
func regexSelects(re string) bool {
	if strings.ContainsAny(re, "|{(") {
		return false
	}
	for i := 0; i < len(re); i++ {
		lit := false
		switch c := re[i]; c {
		case '\\':
			if i+1 < len(re) {
				i++
				lit = !strings.ContainsRune("wWsSbB<>`'./", rune(re[i]))
			}
		case '.', '^', '$', '*', '+', '?', '/':
			// A / is in every path below a root, and . in every one find . gives.
		case '[':
			i = regexBracketEnd(re, i)
		default:
			lit = true
		}
		if lit && (i+1 >= len(re) || re[i+1] != '*' && re[i+1] != '?') {
			return true
		}
	}
	return false
}

// regexBracketEnd is the index of the ] that closes the bracket expression opened at re[i]
// (a ] first in it, after any ^, is one of its characters), or the last index.
func regexBracketEnd(re string, i int) int {
	j := i + 1
	if j < len(re) && re[j] == '^' {
		j++
	}
	if j < len(re) && re[j] == ']' {
		j++
	}
	for ; j < len(re); j++ {
		if re[j] == '[' && j+1 < len(re) && strings.ContainsRune(":.=", rune(re[j+1])) {
			if k := strings.Index(re[j+2:], string(re[j+1])+"]"); k >= 0 {
				j += k + 3
				continue
			}
		}
		if re[j] == ']' {
			return j
		}
	}
	return len(re) - 1
}
