package worker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
)

// VCSDirs are never searched by Glob and Grep.
var VCSDirs = []string{".git", ".svn", ".hg", ".bzr", ".jj", ".sl"}

func isVCS(name string) bool {
	for _, v := range VCSDirs {
		if name == v {
			return true
		}
	}
	return false
}

func hasMeta(s string) bool { return strings.ContainsAny(s, "*?[{\\") }

// ExpandBraces expands {a,b} alternatives (nested too) into plain glob patterns, at most
// limit of them: each group multiplies the count, so a short pattern ({a,b} forty times)
// would make more than memory holds. Past limit it returns false and no patterns, as it does
// for a pattern of more than maxBraceGroups groups, or whose patterns would hold more than
// maxBraceBytes: each group is a level of the expansion holding a copy of the pattern, so
// {a}{a}… 60 000 times took the daemon past 4 GiB with one pattern.
func ExpandBraces(p string, limit int) ([]string, bool) {
	groups := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			groups++
		}
	}
	if groups > maxBraceGroups || limit*len(p) > maxBraceBytes && groups > 0 {
		return nil, false
	}
	var out []string
	if !expandBraces(p, limit, &out) {
		return nil, false
	}
	return out, true
}

// Bounds of one pattern's brace expansion: its groups (each a level of the expansion), and the
// bytes of the patterns it may make (limit of them, each at most the pattern's length).
const (
	maxBraceGroups = 64
	maxBraceBytes  = 1 << 20
)

// expandBraces appends p's expansions to out, and reports false as soon as out would pass
// limit: the work done is bounded by limit, not by what the whole expansion would be.
func expandBraces(p string, limit int, out *[]string) bool {
	depth, open := 0, -1
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth == 0 {
				var alts []string
				d, start := 0, open+1
				for j := open + 1; j < i; j++ {
					switch p[j] {
					case '\\':
						j++
					case '{':
						d++
					case '}':
						d--
					case ',':
						if d == 0 {
							alts = append(alts, p[start:j])
							start = j + 1
						}
					}
				}
				alts = append(alts, p[start:i])
				for _, a := range alts {
					if !expandBraces(p[:open]+a+p[i+1:], limit, out) {
						return false
					}
				}
				return true
			}
		}
	}
	if len(*out) >= limit {
		return false
	}
	*out = append(*out, p)
	return true
}

// MaxBracePatterns is the most patterns a Glob's braces may expand to: the decision expands
// them too (each alternative's start is a read to check), so 4 096 of 4 KB each cost the
// daemon 80 ms and 16 MB for one decide a rate token paid for.
const MaxBracePatterns = 256

// MatchGlob reports whether the slash-separated rel matches pattern segments pat, where a
// "**" segment matches any number of segments and the others use path.Match. It backtracks to
// the last "**" only, as wildcard matching does for `*`, so it takes at most len(pat) times
// len(rel) segment matches: trying every split at every "**" took seconds for one name 44
// levels deep against seven of them, and grew exponentially with each.
func MatchGlob(pat, rel []string) bool {
	p, r := 0, 0
	star, starR := -1, 0 // the last "**" seen, and the segment its match ends before
	for r < len(rel) {
		switch {
		case p < len(pat) && pat[p] == "**":
			star, starR = p, r
			p++
		case p < len(pat) && matchSegment(pat[p], rel[r]):
			p++
			r++
		case star >= 0:
			// The last "**" takes one segment more; what follows it starts again after that.
			starR++
			p, r = star+1, starR
		default:
			return false
		}
	}
	for p < len(pat) && pat[p] == "**" {
		p++
	}
	return p == len(pat)
}

func matchSegment(pat, name string) bool {
	ok, _ := path.Match(pat, name)
	return ok
}

// searchTimeout bounds one Glob or Grep: a search of a deep tree against many patterns, or
// of a huge sparse file, otherwise ran for as long as its client waited, the CPU of the
// user's worker held all the while. Bash's own default timeout is the same.
var searchTimeout = 2 * time.Minute

// searchBounded runs a search with searchTimeout, and says so when that is what ended it.
func searchBounded[R any](ctx context.Context, tool string, search func(context.Context) (R, error)) (R, error) {
	bounded, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()
	r, err := search(bounded)
	if err != nil && ctx.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded) {
		var zero R
		return zero, errcode.Msg(errcode.Timeout, fmt.Sprintf("%s ran past %s and was stopped; search a narrower path, or with fewer patterns", tool, searchTimeout))
	}
	return r, err
}

type globHit struct {
	path  string
	mtime int64
}

func doGlob(ctx context.Context, a *GlobArgs) (*GlobReply, error) {
	root, pattern := a.Root, a.Pattern
	if pattern == "" {
		return nil, errcode.Msg(errcode.Validation, "empty pattern; pass a glob such as \"**/*.go\"")
	}
	if filepath.IsAbs(pattern) {
		root, pattern = "/", strings.TrimPrefix(pattern, "/")
	}
	if !filepath.IsAbs(root) {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("path %q is not absolute; pass an absolute directory", root))
	}
	root = filepath.Clean(root)
	var pats [][]string
	maxDepth := 0
	expanded, ok := ExpandBraces(pattern, MaxBracePatterns)
	if !ok {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("the pattern's braces expand to more than %d patterns (or it has more than %d {a,b} groups, or is too long for its braces); use fewer groups", MaxBracePatterns, maxBraceGroups))
	}
	for _, p := range expanded {
		segs := strings.Split(path.Clean(p), "/")
		// Walk from the static prefix of the pattern, not from root, when all share it.
		pats = append(pats, segs)
		if maxDepth >= 0 {
			for _, s := range segs {
				if s == "**" {
					maxDepth = -1
					break
				}
			}
			if maxDepth >= 0 {
				maxDepth = max(maxDepth, len(segs))
			}
		}
	}
	start, prefix := root, commonStatic(pats)
	if len(prefix) > 0 {
		start = filepath.Join(root, filepath.Join(prefix...))
		for i := range pats {
			pats[i] = pats[i][len(prefix):]
		}
		if maxDepth > 0 {
			maxDepth -= len(prefix)
		}
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("glob path %s: %w; pass an existing directory", root, unwrapPath(err)))
	}
	if !fi.IsDir() {
		return nil, errcode.Msg(errcode.ErrnoENOTDIR, fmt.Sprintf("glob path %s is not a directory; pass the directory to search in", root))
	}
	limit := a.Limit
	if limit <= 0 {
		limit = 100
	}
	deny := denySet(a.Deny)
	// The deny patterns name real paths: a walk from a start reached through a symlink (a
	// link in the project to a denied dir) is matched where it really is too.
	real := realDir(start)
	if real == "/" {
		// A walk of / skips this worker's own /proc, which no search tool reads.
		deny = append(slices.Clip(deny), "/proc")
	}
	if deny.match(start) || deny.match(real) {
		// Everything the walk could list is under a denied path.
		return &GlobReply{Paths: []string{}}, nil
	}
	var hits []globHit
	walkErr := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && isNotExist(err) {
				return fs.SkipAll
			}
			return nil // unreadable directories are skipped, as rg --files does
		}
		if ctx.Err() != nil { // per entry: one entry's matching may take long against 4 096 patterns
			return ctx.Err()
		}
		if p == start {
			if !d.IsDir() && len(pats) == 1 && len(pats[0]) == 0 {
				// The whole pattern was static and names a file (not denied: checked above).
				hits = append(hits, globHit{p, mtimeOf(p, d)})
			}
			return nil
		}
		if deny.match(p) || real != start && deny.match(real+p[len(start):]) {
			// Neither listed nor walked into: a Read deny hides the names too.
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel := strings.Split(p[len(start)+1:], "/")
		if start == "/" {
			rel = strings.Split(p[1:], "/")
		}
		if d.IsDir() {
			if isVCS(d.Name()) || (maxDepth >= 0 && len(rel) >= maxDepth) {
				return filepath.SkipDir
			}
			return nil
		}
		for _, pat := range pats {
			if MatchGlob(pat, rel) {
				hits = append(hits, globHit{p, mtimeOf(p, d)})
				break
			}
		}
		return nil
	})
	if walkErr != nil && !errors.Is(walkErr, fs.SkipAll) {
		return nil, walkErr
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].mtime != hits[j].mtime {
			return hits[i].mtime > hits[j].mtime
		}
		return hits[i].path < hits[j].path
	})
	out := &GlobReply{Total: len(hits)}
	if len(hits) > limit {
		hits = hits[:limit]
		out.Truncated = true
	}
	out.Paths = make([]string, len(hits))
	for i, h := range hits {
		out.Paths[i] = h.path
	}
	return out, nil
}

func mtimeOf(p string, d fs.DirEntry) int64 {
	fi, err := d.Info()
	if err != nil {
		return 0
	}
	if d.Type()&fs.ModeSymlink != 0 {
		if st, err := os.Stat(p); err == nil {
			return st.ModTime().UnixNano()
		}
	}
	return fi.ModTime().UnixNano()
}

// commonStatic is the leading run of literal segments all patterns share (never the last
// segment, which must stay to be matched).
func commonStatic(pats [][]string) []string {
	if len(pats) == 0 {
		return nil
	}
	var out []string
	for i := 0; ; i++ {
		for _, p := range pats {
			if i >= len(p)-1 || hasMeta(p[i]) || p[i] != pats[0][i] || p[i] == ".." || p[i] == "." {
				return out
			}
		}
		out = append(out, pats[0][i])
	}
}

func doGrep(ctx context.Context, a *GrepArgs) (*GrepReply, []byte, error) {
	rg, err := exec.LookPath("rg")
	if err != nil {
		return nil, nil, errcode.Msg(errcode.Unavailable, "Grep needs ripgrep (rg), which is not installed on this host; ask the administrator to install it (Debian package ripgrep), or use Bash grep meanwhile")
	}
	if a.MaxBytes <= 0 {
		a.MaxBytes = 64 << 20
	}
	args, dir := a.Args, a.Dir
	n := len(args)
	if (len(a.Deny) > 0 || a.Decided != nil) && (a.Path == "" || n < 2 || args[n-2] != "--" || args[n-1] != a.Path) {
		return nil, nil, errcode.Msg(errcode.BadRequest, "grep with deny patterns or a decision: the arguments must end with \"--\" and the searched path")
	}
	if n >= 2 && args[n-2] == "--" && args[n-1] == a.Path && searchesRoot(a) {
		// From / rg would walk this worker's own /proc, which no search tool reads: it is held
		// out as a denied tree is, by rg's excludes and the output filter.
		a.Deny = append(slices.Clip(a.Deny), "/proc")
	}
	// With a decision rg is given the decided file or directory itself, never its name (which
	// rg would resolve again, following whatever symlink is there by then): a file as fd 3, a
	// directory as its working directory (so its .gitignore and its parents' still apply), and
	// its output names are put back under Path (shown).
	var searched *decidedSearch
	if a.Decided != nil {
		var err error
		if searched, err = openDecidedSearch(a.Path, a.Decided, a.Deny); err != nil {
			return nil, nil, err
		}
		defer searched.f.Close()
		args = append(append(make([]string, 0, n), args[:n-1]...), searched.arg)
		dir = searched.dir
	}
	var filter *grepFilter
	if len(a.Deny) > 0 {
		var extra []string
		realRoot := realDir(a.Path)
		if searched != nil {
			// The deny patterns are matched where the decided path really is, not where its
			// name leads now.
			realRoot = a.Decided.Resolved
			extra = rgDenyArgsUnder(a.Deny, realRoot, searched.dir != "")
		} else {
			extra = rgDenyArgs(a.Deny)
			// rg anchors "/x" globs at its working directory; in / they are the absolute paths.
			dir = "/"
		}
		// After the caller's own --glob flags: of several globs matching a file, rg obeys the
		// last, so an include such as "*.env" cannot re-admit a denied file.
		args = append(append(append(make([]string, 0, n+len(extra)), args[:n-2]...), extra...), args[n-2:]...)
		filter = &grepFilter{deny: a.Deny, root: a.Path, realRoot: realRoot}
	}
	cmd := exec.CommandContext(ctx, rg, args...)
	cmd.Dir = dir
	if searched != nil && searched.dir == "" {
		cmd.ExtraFiles = []*os.File{searched.f}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 8192}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, errcode.New(errcode.Internal, err)
	}
	oomBefore, oomKnown := oomKills()
	if err := cmd.Start(); err != nil {
		return nil, nil, errcode.New(errcode.Unavailable, fmt.Errorf("start rg: %w; check that rg is installed and executable", err))
	}
	r := bufio.NewReaderSize(stdout, 256<<10)
	reply := &GrepReply{Complete: true}
	var page bytes.Buffer
	var all [][]byte
	var read int64
	stopped := false
	for idx := 0; ; {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Longer than the buffer despite --max-columns: keep its head, drop the rest.
			line = append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				_, err = r.ReadSlice('\n')
			}
			line = append(line, '\n')
		}
		keep := len(line) > 0
		if keep {
			read += int64(len(line))
			line = bytes.TrimSuffix(line, []byte("\n"))
			if searched != nil {
				line = searched.shown(line)
			}
			if filter != nil {
				line, keep = filter.line(line)
			}
		}
		if keep {
			if a.SortByMTime {
				all = append(all, append([]byte(nil), line...))
			} else {
				switch {
				case idx < a.Offset:
				case a.Limit == 0 || idx < a.Offset+a.Limit:
					page.Write(line)
					page.WriteByte('\n')
					reply.Lines++
				default:
					reply.More = true
					stopped = true
				}
			}
			idx++
			reply.Total = idx
		}
		if stopped || err != nil {
			break
		}
		if read > a.MaxBytes {
			reply.CutByBytes = true
			stopped = true
			break
		}
	}
	if stopped {
		reply.Complete = false
		_ = cmd.Process.Kill()
	}
	// Drain so Wait does not block on a full pipe from a killed rg's last write.
	_, _ = io.Copy(io.Discard, r)
	werr := cmd.Wait()
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case stopped:
	case errors.As(werr, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		switch {
		case ok && ws.Exited():
			reply.ExitCode = ws.ExitStatus()
		case ok && ws.Signaled():
			reply.ExitCode = -1
			reply.Signal = unix.SignalName(ws.Signal())
			if reply.Signal == "" {
				reply.Signal = "signal " + strconv.Itoa(int(ws.Signal()))
			}
			// The kernel's OOM killer sends SIGKILL like anyone else: its counter tells.
			if after, ok := oomKills(); ok && oomKnown && after > oomBefore {
				reply.OOMKilled = true
			}
		default:
			reply.ExitCode = -1
		}
	default:
		return nil, nil, errcode.New(errcode.ToolFailed, fmt.Errorf("rg: %w", werr))
	}
	reply.Stderr = strings.TrimSpace(stderr.String())
	if searched != nil {
		ls := strings.Split(reply.Stderr, "\n")
		for i, l := range ls {
			rest, isRg := strings.CutPrefix(l, "rg: ")
			if rest = string(searched.shown([]byte(rest))); isRg {
				rest = "rg: " + rest
			}
			ls[i] = rest
		}
		reply.Stderr = strings.Join(ls, "\n")
	}
	if a.SortByMTime {
		type ent struct {
			line  []byte
			mtime int64
		}
		ents := make([]ent, len(all))
		for i, l := range all {
			ents[i].line = l
			p := string(l)
			if !filepath.IsAbs(p) {
				p = filepath.Join(a.Dir, p)
			}
			if fi, err := os.Stat(p); err == nil {
				ents[i].mtime = fi.ModTime().UnixNano()
			}
		}
		sort.SliceStable(ents, func(i, j int) bool {
			if ents[i].mtime != ents[j].mtime {
				return ents[i].mtime > ents[j].mtime
			}
			return bytes.Compare(ents[i].line, ents[j].line) < 0
		})
		for i := a.Offset; i < len(ents); i++ {
			if a.Limit > 0 && i >= a.Offset+a.Limit {
				reply.More = true
				break
			}
			page.Write(ents[i].line)
			page.WriteByte('\n')
			reply.Lines++
		}
	}
	return reply, page.Bytes(), nil
}

// oomKills is how many processes the kernel's out-of-memory killer has killed in this
// process's memory cgroup and below it, or false where that cannot be read. The worker has no
// cgroup namespace, so /proc/self/cgroup names its cgroup under the host's /sys/fs/cgroup.
func oomKills() (int64, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	var file string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		id, rest, _ := strings.Cut(line, ":")
		ctrls, dir, ok := strings.Cut(rest, ":")
		switch {
		case !ok:
		case slices.Contains(strings.Split(ctrls, ","), "memory"):
			// v1 (or hybrid): the memory hierarchy wins over a v2 one without the controller.
			file = filepath.Join("/sys/fs/cgroup/memory", dir, "memory.oom_control")
		case id == "0" && ctrls == "" && file == "":
			file = filepath.Join("/sys/fs/cgroup", dir, "memory.events")
		}
	}
	if file == "" {
		return 0, false
	}
	data, err = os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// denySet holds absolute gitignore-style patterns (permission.MatchPath's syntax) of paths
// the session may not read.
type denySet []string

// match reports whether the absolute path p, or one of its ancestors, is denied.
func (d denySet) match(p string) bool {
	if len(d) == 0 {
		return false
	}
	segs := permission.SplitPath(p)
	for _, pat := range d {
		if permission.MatchPathSegs(pat, segs) {
			return true
		}
	}
	return false
}

// rgDenyArgs are the rg flags that keep denied paths out of a search: an exclude glob per
// pattern, and field separators that start with a NUL byte, so grepFilter can tell where an
// output line's file path ends whatever the path holds (":" and "-" included).
func rgDenyArgs(deny []string) []string {
	out := []string{"--field-match-separator", `\x00:`, "--field-context-separator", `\x00-`}
	for _, p := range deny {
		if g := rgExclude(p); g != "" {
			out = append(out, "--glob", g)
		}
	}
	return out
}

// rgExclude turns an absolute pattern of permission.MatchPath (path.Match segments and "**"
// segments) into an rg exclude glob anchored at rg's working directory, /. rg's globs differ
// from path.Match in braces (alternatives there, literal here: escaped) and in runs of "*"
// inside a segment (an error there: collapsed). A pattern path.Match rejects matches nothing
// for the policy either and gives "". The output filter stays the guarantee where the two
// syntaxes still differ.
func rgExclude(pattern string) string {
	var segs []string
	for _, s := range strings.Split(pattern, "/") {
		if s == "" {
			continue
		}
		if s == "**" {
			segs = append(segs, s)
			continue
		}
		if _, err := path.Match(s, ""); err != nil {
			return ""
		}
		segs = append(segs, rgSegment(s))
	}
	// A trailing "**" matches no segment too for MatchPath, so "keys/**" denies the directory
	// keys itself; for rg it must say so, or rg still opens the directory (and fails on it
	// where the sandbox hides it).
	for len(segs) > 1 && segs[len(segs)-1] == "**" {
		segs = segs[:len(segs)-1]
	}
	if len(segs) == 0 {
		return ""
	}
	return "!/" + strings.Join(segs, "/")
}

// rgSegment rewrites one path.Match segment for rg: braces escaped, a run of "*" made one.
func rgSegment(s string) string {
	var b strings.Builder
	inClass, star := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		wasStar := star
		star = false
		switch {
		case c == '\\' && i+1 < len(s):
			b.WriteByte(c)
			i++
			b.WriteByte(s[i])
			continue
		case inClass:
			if c == ']' {
				inClass = false
			}
		case c == '[':
			// path.Match has no "]" first in a class (rgExclude rejected such patterns), so
			// the next unescaped "]" ends it.
			inClass = true
		case c == '{' || c == '}':
			b.WriteByte('\\')
		case c == '*':
			star = true
			if wasStar {
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// grepFilter drops rg output lines of denied files and restores rg's own separators.
type grepFilter struct {
	deny denySet
	// root is the searched path as rg prints it, realRoot where it really is: the deny
	// patterns name real paths, and rg follows a symlinked root (a link in the project to a
	// denied dir), so a file under it is matched at both places.
	root, realRoot string
	// last and lastDenied memoise the previous line's file: a file's lines come together.
	last       string
	lastDenied bool
}

func (f *grepFilter) denied(p string) bool {
	if p != f.last {
		f.last, f.lastDenied = p, f.deny.match(p)
		if !f.lastDenied && f.realRoot != f.root && under(p, f.root) {
			f.lastDenied = f.deny.match(f.realRoot + p[len(f.root):])
		}
	}
	return f.lastDenied
}

// searchesRoot reports whether a searches the whole tree from /, where it really is.
func searchesRoot(a *GrepArgs) bool {
	if a.Decided != nil {
		return a.Decided.Resolved == "/"
	}
	return realDir(a.Path) == "/"
}

// realDir is p with its symlinks resolved (rg and the walk follow a symlinked start), or
// p itself when it cannot be resolved (then nothing is listed from it anyway).
func realDir(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// line returns line as rg would have printed it without the NUL separators, and false when
// it belongs to a denied file or its shape is unknown (fail closed).
func (f *grepFilter) line(line []byte) ([]byte, bool) {
	if i := bytes.IndexByte(line, 0); i >= 0 {
		prefix := string(line[:i])
		switch {
		case filepath.IsAbs(prefix):
			if f.denied(prefix) {
				return nil, false
			}
		case isDigits(prefix):
			// A line number: searching one file, rg names none; that file was decided on.
		default:
			return nil, false
		}
		return bytes.ReplaceAll(line, []byte{0}, nil), true
	}
	s := string(line)
	if s == "--" || !filepath.IsAbs(s) {
		// A context break, or a line of the one file searched (no name, no -n).
		return line, true
	}
	// -l and -c lines and rg's notes ("PATH: binary file matches ...") carry no field
	// separator: the whole line, or any part of it before a colon, may be the path.
	if f.denied(s) {
		return nil, false
	}
	for i := 1; i < len(s); i++ {
		if s[i] == ':' && f.deny.match(s[:i]) {
			return nil, false
		}
	}
	return line, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// decidedSearch is the file or directory a Grep decided on, open, and how rg is given it.
type decidedSearch struct {
	f    *os.File
	path string // the searched path as asked, under which rg's names are shown
	// arg is rg's path argument: "." in dir (a directory), or "/dev/fd/3" (a file, f as fd 3).
	arg, dir string
}

// shown puts a name rg printed (at the start of line) back under the path asked for.
func (s *decidedSearch) shown(line []byte) []byte {
	if s.dir != "" {
		if rest, ok := bytes.CutPrefix(line, []byte("./")); ok {
			return append([]byte(strings.TrimSuffix(s.path, "/")+"/"), rest...)
		}
		return line
	}
	if rest, ok := bytes.CutPrefix(line, []byte(s.arg)); ok && (len(rest) == 0 || rest[0] == 0 || rest[0] == ':') {
		return append([]byte(s.path), rest...)
	}
	return line
}

// WARNING: this is how Grep searches only what the policy decided on; rerun
// TestGrepSearchesOnlyTheDecidedPath as root after changing.
//
// openDecidedSearch opens the file or directory a resolve of path found, d, and nothing else,
// as openDecided does for Read: d's resolved path with no symlink followed on the way, then
// the device and inode the resolve saw.
func openDecidedSearch(path string, d *Resolved, deny denySet) (*decidedSearch, error) {
	name := filepath.Clean(path)
	switch {
	case !filepath.IsAbs(path) || !filepath.IsAbs(d.Resolved):
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("path %q is not absolute; pass an absolute path", path))
	case !d.Exists:
		// Missing when decided: whatever is there now was not decided on.
		return nil, notExist(name, deny)
	case d.Special != "":
		return nil, refuseSpecial(name, d.Special)
	case under(d.Resolved, "/proc"):
		return nil, refuseSpecial(name, SpecialProc)
	case d.Ino == 0:
		return nil, errcode.Msg(errcode.Internal, fmt.Sprintf("refused to search %s: the decision on it does not say which file it is; try again", name))
	}
	changed := errcode.Msg(errcode.Conflict, fmt.Sprintf("refused to search %s: it changed between the permission decision and the search (a different file, or a symlink, is there now); search again to have the new one decided", name))
	f, fi, err := openResolved(d, name, changed)
	if err != nil {
		return nil, err
	}
	s := &decidedSearch{f: f, path: name}
	switch {
	case fi.IsDir():
		// The child's working directory is this very directory: /proc/self/fd/N is resolved
		// by the child after the fork, where fd N is still open.
		s.arg, s.dir = ".", "/proc/self/fd/"+strconv.Itoa(int(f.Fd()))
	case fi.Mode().IsRegular():
		s.arg = "/dev/fd/3"
	default:
		f.Close()
		return nil, refuseSpecial(name, "special file")
	}
	return s, nil
}

// rgDenyArgsUnder is rgDenyArgs for a search whose rg runs in root (inDir) or searches one
// file (not inDir: rg searches a file it is given whatever the globs, and the output filter
// and the decision are what keep a denied one out). The excludes are the deny patterns
// made relative to root, where they can be; the output filter stays the guarantee.
func rgDenyArgsUnder(deny []string, root string, inDir bool) []string {
	out := []string{"--field-match-separator", `\x00:`, "--field-context-separator", `\x00-`}
	if !inDir {
		return out
	}
	for _, p := range deny {
		if g := rgExcludeUnder(p, root); g != "" {
			out = append(out, "--glob", g)
		}
	}
	return out
}

// rgExcludeUnder is rgExclude for an rg whose working directory is root: the part of pattern
// that names paths below root, anchored there ("" when it names none or cannot be said).
func rgExcludeUnder(pattern, root string) string {
	segs := strings.Split(strings.Trim(pattern, "/"), "/")
	rootSegs := strings.Split(strings.Trim(root, "/"), "/")
	if root == "/" {
		rootSegs = nil
	}
	for i, r := range rootSegs {
		if i >= len(segs) {
			return "" // the pattern names root or an ancestor: the decision saw to it
		}
		if segs[i] == "**" {
			// Any depth from here: every path below root that ends as the rest does.
			g := rgExclude("/" + strings.Join(segs[i:], "/"))
			if g == "" || g == "!/**" {
				return g
			}
			return "!" + strings.TrimPrefix(g, "!/")
		}
		if ok, err := path.Match(segs[i], r); err != nil || !ok {
			return ""
		}
	}
	if len(segs) <= len(rootSegs) {
		return ""
	}
	return rgExclude("/" + strings.Join(segs[len(rootSegs):], "/"))
}
