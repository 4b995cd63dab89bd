package globwalk

import (
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/proclink"
)

// Budget bounds one expansion: a user's directory may hold millions of entries, and the walk
// runs for a decision.
type Budget struct {
	Entries int // directory entries read, across every pattern
	Matches int // names matched, across every pattern
}

// Link is a match of a pattern whose name leads elsewhere: Resolved is where it opens.
type Link struct {
	Path     string `json:"path"`
	Resolved string `json:"resolved"`
	// Dir is where the directory that holds Path resolves (ThroughLinks only).
	Dir string `json:"dir,omitempty"`
}

// Outside expands each absolute pattern and returns its matches that resolve (symbolic links
// followed) outside every one of dirs, at most max of them. complete is false when the budget
// ran out, or more than max led outside, first: what was not looked at may lead anywhere.
//
// The expansion matches more than a shell's may, never less, so that no match of the shell's
// is missed: a glob segment is matched without regard to case or a leading dot, a bracket
// expression or a backslash matches any one character, an extended glob group (?(…), *(…),
// +(…), @(…), !(…)) any run of them, and `**` any depth of directories, links followed.
// Patterns with a `..` segment are not expanded (complete is false): where `..` leads from a
// link is the kernel's, not the name's.
func Outside(patterns, dirs []string, b Budget, max int) (links []Link, complete bool) {
	return walk(&walker{budget: b, dirs: dirs, max: max, complete: true, seen: map[string]bool{}}, patterns)
}

// ThroughLinks expands each absolute pattern as Outside does and returns its matches whose
// resolution differs from their name (a symbolic link on the way, or the match itself one),
// wherever they lead, at most max of them; complete as for Outside.
func ThroughLinks(patterns []string, b Budget, max int) (links []Link, complete bool) {
	return walk(&walker{budget: b, through: true, max: max, complete: true, seen: map[string]bool{}}, patterns)
}

func walk(w *walker, patterns []string) (links []Link, complete bool) {
	for _, p := range patterns {
		if !path.IsAbs(p) {
			return nil, false
		}
		segs := strings.Split(p, "/")
		for _, s := range segs {
			if s == ".." {
				return nil, false
			}
		}
		w.expand("/", segs, 0)
		if !w.complete {
			return w.links, false
		}
	}
	return w.links, true
}

// maxDepth bounds the directories one pattern descends, `**` included: a link loop would
// otherwise recurse until the budget ran out, one stack frame per level.
const maxDepth = 64

type walker struct {
	budget   Budget
	through  bool // report every match reached through a link (ThroughLinks), not those outside dirs
	dirs     []string
	max      int
	complete bool
	links    []Link
	seen     map[string]bool // matches already resolved
}

// expand matches segs against what dir holds.
func (w *walker) expand(dir string, segs []string, depth int) {
	if !w.complete {
		return
	}
	if depth > maxDepth {
		w.complete = false
		return
	}
	for len(segs) > 0 && (segs[0] == "" || segs[0] == ".") {
		segs = segs[1:]
	}
	if len(segs) == 0 {
		w.match(dir)
		return
	}
	seg, rest := segs[0], segs[1:]
	if !isGlob(seg) {
		// As spelled: nocaseglob takes a shopt, and a line with one is never read-only.
		w.expand(filepath.Join(dir, seg), rest, depth)
		return
	}
	names, ok := w.readDir(dir)
	if !ok {
		return
	}
	if seg == "**" {
		w.expand(dir, rest, depth+1) // no directory at all
		for _, n := range names {
			sub := filepath.Join(dir, n)
			if fi, err := os.Stat(sub); err == nil && fi.IsDir() {
				w.expand(sub, segs, depth+1)
			}
		}
		return
	}
	pat := loosen(seg) // a plain segment too: it is lower-cased
	for _, n := range names {
		if ok, err := path.Match(pat, strings.ToLower(n)); ok && err == nil {
			w.expand(filepath.Join(dir, n), rest, depth+1)
		}
	}
}

// readDir lists dir's names within the entries budget; false when dir cannot be listed (not
// there, not a directory, not the owner's to read: the shell could not list it either) or
// the budget ran out.
func (w *walker) readDir(dir string) ([]string, bool) {
	// O_DIRECTORY: a FIFO (or a device) the glob matched is no dir, and opening it as a
	// file would wait for a writer.
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	var names []string
	for {
		ns, err := f.Readdirnames(256)
		w.budget.Entries -= len(ns)
		if w.budget.Entries < 0 {
			w.complete = false
			return nil, false
		}
		names = append(names, ns...)
		if err != nil || len(ns) == 0 {
			return names, true
		}
	}
}

// match records p when it exists and resolves outside w.dirs (with through: anywhere but
// to its own name).
func (w *walker) match(p string) {
	if w.seen[p] {
		return
	}
	w.seen[p] = true
	if w.budget.Matches--; w.budget.Matches < 0 {
		w.complete = false
		return
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil || r != p {
		// A link into /proc/self leads where the program that opens it is, not where the
		// walk is (where it may not even be there): outside any dir.
		if t := proclink.Target(p); t != "" {
			r, err = t, nil
		}
	}
	if err != nil {
		return // not there (or a dangling link): the shell keeps the word, which opens nothing
	}
	dir := ""
	if w.through {
		if r == p {
			return
		}
		if dir, err = filepath.EvalSymlinks(filepath.Dir(p)); err != nil {
			dir = filepath.Dir(p)
		}
	}
	for _, d := range w.dirs {
		if r == d || strings.HasPrefix(r, strings.TrimSuffix(d, "/")+"/") {
			return
		}
	}
	if len(w.links) >= w.max {
		w.complete = false
		return
	}
	w.links = append(w.links, Link{Path: p, Resolved: r, Dir: dir})
}

// isGlob reports a segment with a character a shell may expand.
func isGlob(seg string) bool { return strings.ContainsAny(seg, "*?[\\") || extGroup(seg, 0) >= 0 }

// loosen turns a shell glob segment into a lower-case path.Match pattern that matches at
// least what the segment matches (Outside's rules). A ? or a bracket expression becomes *:
// in the C locale bash matches one byte with it, which is no whole character of a UTF-8
// name, so only a run matches at least as much.
func loosen(seg string) string {
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if end := extGroup(seg, i); end > 0 {
			b.WriteByte('*')
			i = end
			continue
		}
		switch c {
		case '*', '?':
			b.WriteByte('*')
		case '\\':
			b.WriteByte('*')
			i++ // the escaped byte is the one character
		case '[':
			if end := BracketEnd(seg, i); end > 0 {
				i = end
			}
			b.WriteByte('*') // the expression, or a lone [ (literal)
		default:
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c >= 0x80 {
				// A byte of a multi-byte character, whose case folding is Unicode's: any run.
				b.WriteByte('*')
				continue
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}

// BracketEnd returns the index of the ] closing the bracket expression that starts at seg[i],
// or -1: a ] first (after ! or ^) is a member, and [:class:], [=c=] and [.c.] hold ] of theirs.
func BracketEnd(seg string, i int) int {
	j := i + 1
	if j < len(seg) && (seg[j] == '!' || seg[j] == '^') {
		j++
	}
	if j < len(seg) && seg[j] == ']' {
		j++
	}
	for ; j < len(seg); j++ {
		switch {
		case seg[j] == ']':
			return j
		case seg[j] == '[' && j+1 < len(seg) && strings.IndexByte(":=.", seg[j+1]) >= 0:
			close := string(seg[j+1]) + "]"
			k := strings.Index(seg[j+2:], close)
			if k < 0 {
				return -1
			}
			j += 2 + k + 1
		}
	}
	return -1
}

// extGroup returns the index of the ) closing an extended glob group that starts at seg[i]
// (?( *( +( @( !(), or -1.
func extGroup(seg string, i int) int {
	if i+1 >= len(seg) || seg[i+1] != '(' || !strings.ContainsRune("?*+@!", rune(seg[i])) {
		return -1
	}
	depth := 0
	for j := i + 1; j < len(seg); j++ {
		switch seg[j] {
		case '\\':
			j++
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}
