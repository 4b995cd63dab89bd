package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/globwalk"
)

// HostPath is where a path leads for a process of the caller's own, outside any sandbox.
type HostPath struct {
	// Resolved is the path with every symlink on it followed, as far as it exists; from the
	// first part that does not (or cannot be searched), the rest as named.
	Resolved string
	// Special is "hidden" when the path leads into one hidden(p) says the sandbox hides (the
	// walk stops there, as a sandboxed lookup would), "proc" for a path in /proc, else
	// "device", "fifo" or "socket" for what it leads to, or "".
	Special string
	Exists  bool
	IsDir   bool
}

// ErrOpenerDependent is a path that leads through one of /proc's links to a process's root,
// cwd, executable or files: where it leads depends on the process that opens it.
var ErrOpenerDependent = errors.New("the path leads through /proc to a process's root, cwd or files, which depend on the process that opens it")

// maxHostLinks is the kernel's bound on the symlinks one lookup follows (ELOOP past it).
const maxHostLinks = 40

// procLinks are the entries of a /proc/PID (or self, thread-self, task/TID) dir that lead
// elsewhere, as magic links, for whichever process opens them.
var procLinks = map[string]bool{"root": true, "cwd": true, "exe": true, "fd": true, "map_files": true}

// ResolveOnHost resolves the absolute path p as the caller (uid, gid, groups) looks it up in
// the daemon's mount namespace, the host's. It is for a decision about a path the caller
// opens itself, outside any sandbox (an agent's hook): the owner's worker looks from inside
// the sandbox's view, where /tmp and /dev/shm are private and /proc is its own, so a link the
// caller left in /tmp to a denied file, or a /proc/PID/cwd, leads somewhere else there.
//
// The walk is physical: `..` is the parent of the dir reached, as the kernel takes it. hidden
// says which paths the sandbox hides; the walk does not look into them.
//
// WARNING: the daemon looks up user-named paths here, as the caller (asCaller); rerun as root
// after changing: go test -run 'TestResolveOnHost|TestAsCaller' ./sandbox/
func ResolveOnHost(uid, gid uint32, groups []uint32, p string, hidden func(string) bool) (HostPath, error) {
	out, errs := ResolveAllOnHost(uid, gid, groups, []string{p}, hidden)
	return out[0], errs[0]
}

// ResolveAllOnHost is ResolveOnHost of each path, under one change of identity: a command's
// paths cost a lookup each, not a lookup and a thread's identity switched twice.
func ResolveAllOnHost(uid, gid uint32, groups []uint32, paths []string, hidden func(string) bool) ([]HostPath, []error) {
	out, errs := make([]HostPath, len(paths)), make([]error, len(paths))
	err := asCaller(uid, gid, groups, func() {
		seen := lookups{}
		for i, p := range paths {
			if !filepath.IsAbs(p) {
				errs[i] = fmt.Errorf("path %q is not absolute", p)
				continue
			}
			out[i], errs[i] = walkHost(p, hidden, seen)
		}
	})
	if err != nil {
		for i := range errs {
			out[i], errs[i] = HostPath{}, err
		}
	}
	return out, errs
}

// lookups keeps one batch's lstat answers: a command's paths share their directories (the cwd,
// the home), each looked up once.
type lookups map[string]lstatAnswer

type lstatAnswer struct {
	fi  fs.FileInfo
	err error
}

func (l lookups) lstat(p string) (fs.FileInfo, error) {
	if a, ok := l[p]; ok {
		return a.fi, a.err
	}
	fi, err := os.Lstat(p)
	l[p] = lstatAnswer{fi, err}
	return fi, err
}

// walkHost is ResolveOnHost's walk, on the calling thread's identity.
func walkHost(p string, hidden func(string) bool, seen lookups) (HostPath, error) {
	resolved := "/"
	rest := strings.Split(p, "/")
	links := 0
	var last fs.FileInfo
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = filepath.Dir(resolved)
			last = nil
			continue
		}
		next := filepath.Join(resolved, c)
		if hidden != nil && hidden(next) {
			return HostPath{Resolved: joinRest(next, rest), Special: "hidden"}, nil
		}
		if next == "/proc" {
			// /proc/self is the daemon here, not the opener: what lies below is judged by its
			// names, never looked up.
			below := filepath.Clean("/" + strings.Join(rest, "/"))
			for _, part := range strings.Split(below, "/") {
				if procLinks[part] {
					return HostPath{}, ErrOpenerDependent
				}
			}
			return HostPath{Resolved: filepath.Join("/proc", below), Special: "proc", Exists: true}, nil
		}
		fi, err := seen.lstat(next)
		if err != nil {
			// Missing, not a dir on the way, or not searchable by the caller: the caller's own
			// open stops here too.
			return HostPath{Resolved: joinRest(next, rest)}, nil
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			links++
			target, err := os.Readlink(next)
			if err != nil || links > maxHostLinks {
				return HostPath{Resolved: joinRest(next, rest)}, nil // the open fails (ELOOP) too
			}
			if strings.HasPrefix(target, "/") {
				resolved = "/"
			}
			rest = append(strings.Split(target, "/"), rest...)
			last = nil
			continue
		}
		resolved, last = next, fi
	}
	if last == nil {
		if fi, err := seen.lstat(resolved); err == nil {
			last = fi
		}
	}
	out := HostPath{Resolved: resolved, Exists: last != nil}
	if last != nil {
		out.IsDir = last.IsDir()
		out.Special = specialFile(last.Mode())
	}
	return out, nil
}

// joinRest is dir followed by the components not walked, cleaned.
func joinRest(dir string, rest []string) string {
	return filepath.Join(append([]string{dir}, rest...)...)
}

// specialFile names a file never to be read as one: "device", "fifo" or "socket".
func specialFile(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0, m&fs.ModeCharDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return ""
}

// WalkBudget bounds walks of trees the root daemon makes for one decision: the entries they
// may visit together, and the bytes of dir names they may hold queued at once.
type WalkBudget struct {
	Entries int
	Bytes   int
}

// walkChunk is how many entries of a dir are read at once: a dir of a million names costs
// the walk one chunk of memory, not a million names.
const walkChunk = 256

// NamesBelow walks dir as the caller, breadth first, following no link (a copy puts a link
// under its name as it puts a file), and returns the paths below it (relative,
// slash-separated) keep accepts, at most maxKept of them. complete is false when the walk
// stopped before its end: b ran out, ctx ended, or a dir could not be read. One dir is open
// at a time, read in chunks.
func NamesBelow(ctx context.Context, uid, gid uint32, groups []uint32, dir string, keep func(rel string) bool, b *WalkBudget, maxKept int) (kept []string, complete bool, err error) {
	complete = true
	walk := func() {
		root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			complete = false
			return
		}
		defer unix.Close(root)
		queue := []string{""} // dirs to read, relative to dir
		for len(queue) > 0 {
			rel := queue[0]
			queue = queue[1:]
			b.Bytes += len(rel)
			f, err := openWalkDir(root, rel)
			if err != nil {
				complete = false
				return
			}
			for {
				ents, rerr := f.ReadDir(walkChunk)
				for _, e := range ents {
					if b.Entries--; b.Entries < 0 || ctx.Err() != nil {
						f.Close()
						complete = false
						return
					}
					r := e.Name()
					if rel != "" {
						r = rel + "/" + r
					}
					if keep(r) {
						if kept = append(kept, r); len(kept) >= maxKept {
							f.Close()
							return // enough to decide: the policy asks about one
						}
					}
					if e.Type().IsDir() {
						if b.Bytes -= len(r); b.Bytes < 0 {
							f.Close()
							complete = false
							return
						}
						queue = append(queue, r)
					}
				}
				if rerr != nil {
					f.Close()
					if !errors.Is(rerr, io.EOF) {
						complete = false
						return
					}
					break
				}
			}
		}
	}
	err = asCaller(uid, gid, groups, walk)
	return kept, complete, err
}

// openWalkDir opens the dir rel below the open dir root ("" for root itself) for listing,
// reached without a symlink or a step out: an entry listed as a dir may have been swapped,
// since, for a link out of the tree or a FIFO, whose open would block the walk for good.
func openWalkDir(root int, rel string) (*os.File, error) {
	if rel == "" {
		rel = "."
	}
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), rel), nil
}

// GlobOutsideOnHost is globwalk.Outside as the caller (uid, gid, groups) looks the patterns up
// in the daemon's mount namespace, for a Bash line's decision: where a match leads out of the
// session, it leads out in the sandbox too (a link to /tmp is outside in either view). The
// listing's CPU is the daemon's, charged to the caller's share of it (walkShare); one owing
// its share gets no walk (false: the line's paths are then unknown).
//
// WARNING: the daemon lists user-named dirs here, as the caller (asCaller); rerun as root after
// changing: go test -run 'TestGlobOutsideOnHost|TestAsCaller' ./sandbox/
func GlobOutsideOnHost(uid, gid, tenant uint32, groups []uint32, patterns, dirs []string, b globwalk.Budget, max int) (links []globwalk.Link, complete bool, err error) {
	return globOnHost(uid, gid, tenant, groups, func() ([]globwalk.Link, bool) { return globwalk.Outside(patterns, dirs, b, max) })
}

// GlobThroughLinksOnHost is globwalk.ThroughLinks run as the caller, on the same terms as
// GlobOutsideOnHost.
func GlobThroughLinksOnHost(uid, gid, tenant uint32, groups []uint32, patterns []string, b globwalk.Budget, max int) (links []globwalk.Link, complete bool, err error) {
	return globOnHost(uid, gid, tenant, groups, func() ([]globwalk.Link, bool) { return globwalk.ThroughLinks(patterns, b, max) })
}

func globOnHost(uid, gid, tenant uint32, groups []uint32, expand func() ([]globwalk.Link, bool)) (links []globwalk.Link, complete bool, err error) {
	if walkShare.wait(tenant) > 0 {
		return nil, false, nil
	}
	err = asCaller(uid, gid, groups, func() {
		began := threadCPU()
		links, complete = expand()
		walkShare.charge(tenant, threadCPU()-began)
	})
	return links, complete, err
}

// FilePrints are what each of paths is now to the caller: the link itself and what it leads
// to (device, inode, size, change time), or why it cannot be looked at. Equal prints say a
// file was neither written, replaced, moved nor had its mode changed since.
func FilePrints(uid, gid uint32, groups []uint32, paths []string) (string, error) {
	var b strings.Builder
	err := asCaller(uid, gid, groups, func() {
		for _, p := range paths {
			for _, follow := range []bool{false, true} {
				var st unix.Stat_t
				var err error
				if follow {
					err = unix.Stat(p, &st)
				} else {
					err = unix.Lstat(p, &st)
				}
				if err != nil {
					fmt.Fprintf(&b, "%s:%v;", p, err)
					continue
				}
				fmt.Fprintf(&b, "%s:%d:%d:%d:%d.%d:%o;", p, st.Dev, st.Ino, st.Size, st.Ctim.Sec, st.Ctim.Nsec, st.Mode)
			}
		}
	})
	return b.String(), err
}
