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
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/internal/errcode"
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

// ExpandBraces expands {a,b} alternatives (nested too) into plain glob patterns.
func ExpandBraces(p string) []string {
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
				var out []string
				for _, a := range alts {
					out = append(out, ExpandBraces(p[:open]+a+p[i+1:])...)
				}
				return out
			}
		}
	}
	return []string{p}
}

// MatchGlob reports whether the slash-separated rel matches pattern segments pat, where a
// "**" segment matches any number of segments and the others use path.Match.
func MatchGlob(pat, rel []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 1 && pat[1] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 1 {
				return true
			}
			for i := 0; i <= len(rel); i++ {
				if MatchGlob(pat[1:], rel[i:]) {
					return true
				}
			}
			return false
		}
		if len(rel) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], rel[0]); !ok {
			return false
		}
		pat, rel = pat[1:], rel[1:]
	}
	return len(rel) == 0
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
	for _, p := range ExpandBraces(pattern) {
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
	var hits []globHit
	n := 0
	walkErr := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == start && isNotExist(err) {
				return fs.SkipAll
			}
			return nil // unreadable directories are skipped, as rg --files does
		}
		n++
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if p == start {
			if !d.IsDir() && len(pats) == 1 && len(pats[0]) == 0 {
				// The whole pattern was static and names a file.
				hits = append(hits, globHit{p, mtimeOf(p, d)})
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
	cmd := exec.CommandContext(ctx, rg, a.Args...)
	cmd.Dir = a.Dir
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 8192}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, errcode.New(errcode.Internal, err)
	}
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
		if len(line) > 0 {
			read += int64(len(line))
			line = bytes.TrimSuffix(line, []byte("\n"))
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
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			reply.ExitCode = ws.ExitStatus()
		} else {
			reply.ExitCode = -1
		}
	default:
		return nil, nil, errcode.New(errcode.ToolFailed, fmt.Errorf("rg: %w", werr))
	}
	reply.Stderr = strings.TrimSpace(stderr.String())
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
