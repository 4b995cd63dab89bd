package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// resolve follows symlinks in the longest existing prefix of p, so a rule or a mount names the
// real place (e.g. /var/run -> /run). The rest of the path is kept as given.
func resolve(v *fsView, p string) string {
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

// fsView is one plan's look at the host's filesystem: each path is lstat'ed once. A plan is
// made from one moment's view anyway (its child runs after), and resolving a dozen deny paths
// under one home, then asking which exist and who owns their parents, asked the kernel about
// the same paths ~100 times a call. A nil view asks the kernel every time.
type fsView struct {
	lstats map[string]lstatResult
	links  map[string]linkResult // filepath.EvalSymlinks of a symlink met while resolving
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
	fi, err := os.Lstat(p)
	v.lstats[p] = lstatResult{fi, err}
	return fi, err
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
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == uid {
				return d
			}
			return ""
		}
		if d == "/" {
			return ""
		}
	}
}
