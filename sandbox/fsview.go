package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// resolve follows symlinks in the longest existing prefix of p, so a rule or a mount names the
// real place (e.g. /var/run -> /run). The rest of the path is kept as given.
func resolve(v *fsView, p string) string {
	if v != nil && strings.HasPrefix(p, "/") && filepath.Clean(p) == p {
		r, _ := v.resolveClean(p)
		return r
	}
	return resolveWalk(v, p)
}

// resolveWalk is resolve one component after the other.
func resolveWalk(v *fsView, p string) string {
	// One pass over the components, each looked at once: resolving every prefix from the
	// root again (EvalSymlinks per parent) repeats work for every missing deny path.
	// Same result: the resolved longest prefix whose resolution succeeds, then the rest.
	resolved := "/"
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, c := range parts {
		if c == "" {
			continue
		}
		next := filepath.Join(resolved, c)
		fi, err := v.lstat(next)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			next, err = v.evalSymlinks(next)
		}
		if err != nil {
			return filepath.Join(append([]string{resolved}, parts[i:]...)...)
		}
		resolved = next
	}
	return resolved
}

// resolveClean is resolveWalk of a clean absolute path, from its parent's resolution, which
// the view keeps: a plan resolves ~200 protected candidates in a handful of dirs, and walking
// each from the root again cost more than the rest of the plan. whole reports that every
// component resolved, so that what lies below goes on resolving.
func (v *fsView) resolveClean(p string) (r string, whole bool) {
	if p == "/" {
		return "/", true
	}
	if c, ok := v.resolved[p]; ok {
		return c.path, c.whole
	}
	i := strings.LastIndexByte(p, '/')
	dir, name := p[:max(i, 1)], p[i+1:]
	rd, whole := v.resolveClean(dir)
	r = rd + "/" + name
	if rd == "/" {
		r = "/" + name
	}
	if whole {
		fi, err := v.lstat(r)
		if err == nil && fi.Mode()&os.ModeSymlink != 0 {
			var target string
			if target, err = v.evalSymlinks(r); err == nil {
				r = target
			}
		}
		whole = err == nil
	}
	if v.resolved == nil {
		v.resolved = make(map[string]resolution, 64)
	}
	v.resolved[p] = resolution{r, whole}
	return r, whole
}

// fsView is one plan's look at the host's filesystem: each path is lstat'ed once. A plan is
// made from one moment's view anyway (its child runs after), and resolving a dozen deny paths
// under one home, then asking which exist and who owns their parents, asked the kernel about
// the same paths ~100 times a call. A nil view asks the kernel every time.
type fsView struct {
	lstats map[string]lstatResult
	links  map[string]linkResult // filepath.EvalSymlinks of a symlink met while resolving
	// listed holds the entry names of dirs read whole (listDirsOf): a name one lacks is
	// missing without a syscall. Most protected paths are missing, dozens a call.
	listed map[string]map[string]bool
	// resolved holds resolveClean's answers, a path's after its dir's.
	resolved map[string]resolution
	// matchedLinks are the user's symlinks a deny pattern matched, which the plan covers where
	// they lead (throughLinks) and the sweep keeps leading there (linksToHidden).
	matchedLinks []string
}

type resolution struct {
	path  string
	whole bool
}

type linkResult struct {
	target string
	err    error
}

type lstatResult struct {
	fi  os.FileInfo
	err error
}

func newFSView() *fsView { return &fsView{lstats: make(map[string]lstatResult, 64)} }

func (v *fsView) lstat(p string) (os.FileInfo, error) {
	if v == nil {
		return os.Lstat(p)
	}
	if r, ok := v.lstats[p]; ok {
		return r.fi, r.err
	}
	if v.knownMissing(p) {
		err := &fs.PathError{Op: "lstat", Path: p, Err: syscall.ENOENT}
		v.lstats[p] = lstatResult{nil, err}
		return nil, err
	}
	fi, err := os.Lstat(p)
	v.lstats[p] = lstatResult{fi, err}
	return fi, err
}

// knownMissing reports whether what the view saw already says the clean absolute path p does
// not exist: a listing of its dir without it, or an ancestor found missing.
func (v *fsView) knownMissing(p string) bool {
	for strings.HasPrefix(p, "/") && p != "/" {
		i := strings.LastIndexByte(p, '/')
		dir, name := p[:max(i, 1)], p[i+1:]
		if names, ok := v.listed[dir]; ok {
			return !names[name]
		}
		if r, ok := v.lstats[dir]; ok {
			return errors.Is(r.err, fs.ErrNotExist)
		}
		p = dir
	}
	return false
}

// listDirsOf reads whole each dir that holds several of paths (most of a call's protected
// candidates share a few: the session dir, .git, the home), shallowest first, so a dir a
// listing shows missing is not read at all. A dir that cannot be read, or holds more than
// maxListed entries, is left to lstat.
func (v *fsView) listDirsOf(paths []string) {
	count := map[string]int{}
	for _, p := range paths {
		if strings.HasPrefix(p, "/") {
			count[p[:max(strings.LastIndexByte(p, '/'), 1)]]++
		}
	}
	var dirs []string
	for d, n := range count {
		if n >= 3 {
			dirs = append(dirs, d)
		}
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(a, "/") - strings.Count(b, "/") })
	for _, d := range dirs {
		if _, err := v.lstat(d); err != nil {
			continue // missing: what lies below is missing too, by lstat's own rule
		}
		fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		names := readNames(fd, maxListed)
		unix.Close(fd)
		if names == nil {
			continue
		}
		if v.listed == nil {
			v.listed = map[string]map[string]bool{}
		}
		v.listed[d] = names
	}
}

// evalSymlinks is filepath.EvalSymlinks through the view: several deny paths share a symlinked
// parent (/var/run), which is then followed once.
func (v *fsView) evalSymlinks(p string) (string, error) {
	if v == nil {
		return filepath.EvalSymlinks(p)
	}
	if r, ok := v.links[p]; ok {
		return r.target, r.err
	}
	target, err := filepath.EvalSymlinks(p)
	if v.links == nil {
		v.links = map[string]linkResult{}
	}
	v.links[p] = linkResult{target, err}
	return target, err
}

// stat is os.Stat through the view: a symlink is followed (uncached; rare in a resolved path).
func (v *fsView) stat(p string) (os.FileInfo, error) {
	fi, err := v.lstat(p)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return os.Stat(p)
	}
	return fi, err
}

// ownDirInTheWay returns the dir of uid's that keeps the caller from telling whether p exists
// (p's lstat failed for want of search permission, and that dir is the nearest ancestor the
// caller can stat), or "". A call, as the same user, could chmod that dir and reach p, so a
// plan must not take p for missing.
func (v *fsView) ownDirInTheWay(p string, uid uint32) string {
	if _, err := v.lstat(p); !errors.Is(err, fs.ErrPermission) {
		return ""
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if fi, err := v.lstat(d); err == nil {
			if fi.Mode()&fs.ModeSymlink != 0 {
				// The link is what could be looked at; the dir it leads to is what cannot be
				// searched, and whose owner could chmod it.
				if fi, err = v.stat(d); err != nil {
					return ""
				}
				d = resolve(v, d)
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid && fi.IsDir() {
				return d
			}
			return ""
		}
		if d == "/" {
			return ""
		}
	}
}
