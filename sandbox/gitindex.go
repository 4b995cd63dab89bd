package sandbox

import (
	"bufio"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A repository's index lists its submodules as gitlinks (mode 160000). The user's `git
// status` runs git in each one that is checked out, with the config of the git dir its `.git`
// names: a call that adds a gitlink and a `lib/.git` naming a git dir of its own makes the
// user's next `git status` run that dir's core.fsmonitor. So the sweeps look at each gitlink's
// .git, which git's index tells them where to find.

// maxIndexBytes bounds an index read to find its gitlinks.
const maxIndexBytes = 256 << 20

// maxIndexName bounds one path of an index (git's own paths are at most PATH_MAX, 4096), and
// maxIndexLinkBytes what one index's gitlinks may hold, each counted with the string header
// it costs (thousands of submodules): an index is the user's file, and what the root daemon
// keeps of it must not grow with its content.
const (
	maxIndexName      = 4096
	maxIndexLinkBytes = 1 << 20
	linkOverhead      = 16
)

// indexGitlinks returns the paths of the gitlinks the index file r of size bytes lists, and
// the name of the shared index a split index names ("" when none); false when it is no index
// it can read. The file is read once, in order, a buffer at a time: a 256 MB index costs the
// daemon the buffer, not its size. Its object ids may be SHA-1's or SHA-256's; the trailing
// checksum is not verified (git refuses an index whose checksum fails, so reading one only
// looks at more), and a file that reads as neither is read again as the other.
func indexGitlinks(r io.ReadSeeker, size int64) (links []string, shared string, ok bool) {
	for _, n := range []int{sha1.Size, sha256.Size} {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return nil, "", false
		}
		in := &indexStream{r: bufio.NewReaderSize(r, 64<<10)}
		if links, shared, ok := in.parse(size, n); ok {
			return links, shared, true
		}
	}
	return nil, "", false
}

// indexStream reads an index in order, counting what it consumed.
type indexStream struct {
	r *bufio.Reader
	n int64
}

func (s *indexStream) full(b []byte) bool {
	k, err := io.ReadFull(s.r, b)
	s.n += int64(k)
	return err == nil
}

func (s *indexStream) skip(n int64) bool {
	for n > 0 {
		k, err := s.r.Discard(int(min(n, 1<<20)))
		s.n += int64(k)
		n -= int64(k)
		if err != nil {
			return false
		}
	}
	return true
}

// name reads a NUL-terminated path of at most maxIndexName bytes, valid until the next read.
func (s *indexStream) name() ([]byte, bool) {
	b, err := s.r.ReadSlice(0)
	s.n += int64(len(b))
	if err != nil || len(b)-1 > maxIndexName {
		return nil, false
	}
	return b[:len(b)-1], true
}

// parse reads the entries (version 2, 3 or 4) of an index of size bytes whose object ids are
// oidLen bytes long, and its extensions for a split index's link, up to its checksum.
func (s *indexStream) parse(size int64, oidLen int) (links []string, shared string, ok bool) {
	var head [12]byte
	if !s.full(head[:]) || string(head[:4]) != "DIRC" {
		return nil, "", false
	}
	ver := binary.BigEndian.Uint32(head[4:8])
	count := binary.BigEndian.Uint32(head[8:12])
	if ver < 2 || ver > 4 || int64(count) > size {
		return nil, "", false
	}
	entry := make([]byte, 40+oidLen+2) // times, dev, ino, mode, uid, gid, size; the oid; flags
	var prev []byte
	linkBytes := 0
	for range count {
		start := s.n
		if !s.full(entry) {
			return nil, "", false
		}
		mode := binary.BigEndian.Uint32(entry[24:28])
		flags := binary.BigEndian.Uint16(entry[40+oidLen:])
		if flags&0x4000 != 0 { // extended flags
			var ext [2]byte
			if ver < 3 || !s.full(ext[:]) {
				return nil, "", false
			}
		}
		var name []byte
		if ver == 4 {
			strip, ok := s.varint()
			if !ok || strip > uint64(len(prev)) {
				return nil, "", false
			}
			suffix, ok := s.name()
			if !ok || len(prev)-int(strip)+len(suffix) > maxIndexName {
				return nil, "", false
			}
			// In place: each name is the one before it, cut, plus its own suffix. Built
			// afresh for each entry, a file of names one byte longer each took time and
			// memory in the square of its entries.
			name = append(prev[:len(prev)-int(strip)], suffix...)
			prev = name
		} else {
			var ok bool
			if name, ok = s.name(); !ok {
				return nil, "", false
			}
			// NUL-padded to a multiple of eight.
			used := s.n - start
			if !s.skip((used-1+8)&^7 - used) {
				return nil, "", false
			}
		}
		if mode>>12 == 0o16 { // 0160000: a gitlink
			// git writes no empty path; each kept one costs its header whatever its length.
			if linkBytes += len(name) + linkOverhead; len(name) == 0 || linkBytes > maxIndexLinkBytes {
				return nil, "", false
			}
			links = append(links, string(name))
		}
	}
	// Extensions: a four-byte signature and a four-byte size each; "link" names the shared
	// index whose entries a split index adds to. Then the checksum. git writes a handful (TREE,
	// REUC, UNTR, FSMN, EOIE, IEOT, link, sdir): more is no index of git's, and 256 MB of
	// empty ones took a second to step through.
	for range maxIndexExtensions {
		left := size - s.n
		if left == int64(oidLen) {
			return links, shared, true
		}
		var ext [8]byte
		if left < int64(8+oidLen) || !s.full(ext[:]) {
			return nil, "", false
		}
		esize := int64(binary.BigEndian.Uint32(ext[4:8]))
		if esize > left-int64(8+oidLen) {
			return nil, "", false
		}
		if string(ext[:4]) == "link" {
			oid := make([]byte, oidLen)
			if esize < int64(oidLen) || !s.full(oid) {
				return nil, "", false
			}
			shared = "sharedindex." + hex.EncodeToString(oid)
			esize -= int64(oidLen)
		}
		if !s.skip(esize) {
			return nil, "", false
		}
	}
	return nil, "", false
}

// maxIndexExtensions bounds the extensions of an index read.
const maxIndexExtensions = 64

// varint reads git's offset varint (gitVarint).
func (s *indexStream) varint() (uint64, bool) {
	var b [10]byte
	for i := range b {
		c, err := s.r.ReadByte()
		if err != nil {
			return 0, false
		}
		s.n++
		b[i] = c
		if c&0x80 == 0 {
			v, n := gitVarint(b[:i+1])
			return v, n == i+1
		}
	}
	return 0, false
}

// gitVarint decodes git's offset varint (each continuation adds one before shifting): the
// value and its length, 0 when b holds none.
func gitVarint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		if i > 0 {
			v++
		}
		if i >= 9 {
			return 0, 0
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// gitlinkCache remembers each index's gitlinks (or why they could not be read) by what stat
// says of the index, so a sweep reads and hashes an index again only after it changed.
type gitlinkCache struct {
	mu    sync.Mutex
	m     map[indexKey]indexLinks
	bytes int // of the paths m holds, each with linkOverhead
}

// indexReads keeps one user's index reads one at a time.
var indexReads = &uidLocks{locks: map[uint32]*uidLock{}}

type indexLinks struct {
	links []string
	err   error
}

type indexKey struct {
	dev, ino          uint64
	size, mtime, ctim int64
}

// maxCachedIndexes and maxCachedLinkBytes (paths with their headers) bound the cache; past
// either, it starts over.
const (
	maxCachedIndexes   = 256
	maxCachedLinkBytes = 8 << 20
)

// gitlinkGits returns the .git of each gitlink of the repository at dir (below rfd, reached
// as the caller) that was made or changed at since or later (its ctime: no call can set it),
// or, when it is a dir, whose config, config.worktree or commondir was: relative to rfd. An
// index it cannot read is an error, and itself returned when it changed since then.
// Run as the caller.
//
// had are the gitlinks the index held when the call started and the identity of each one's .git
// then (gitlinksAt), nil when unknown (the repository's dir could not be opened): a gitlink added since, or whose .git is another one now,
// makes its .git the call's whatever its age (a repository an earlier call made, registered
// as a submodule by this one or moved into a submodule's place).
func (c *gitlinkCache) gitlinkGits(tenant uint32, rfd int, dir string, since time.Time, had map[string]fileID) ([]string, error) {
	idx := path.Join(dir, ".git", "index")
	got, st, ok := c.read(tenant, rfd, idx)
	if !ok {
		return nil, nil // no index: no gitlinks
	}
	if got.err != nil {
		if !time.Unix(st.Ctim.Unix()).Before(since) {
			// The call left an index whose gitlinks cannot be read (past the bound, or not
			// git's format): it goes, as what cannot be checked.
			return []string{idx}, got.err
		}
		return nil, got.err
	}
	var out []string
	changed := func(rel string) bool {
		var st unix.Stat_t
		return unix.Fstatat(rfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && !time.Unix(st.Ctim.Unix()).Before(since)
	}
	for _, l := range got.links {
		if !filepath.IsLocal(l) {
			continue // git refuses such a path too: no submodule of it is ever checked out
		}
		g := path.Join(dir, l, ".git")
		if had != nil {
			var lst unix.Stat_t
			if id, ok := had[l]; unix.Fstatat(rfd, g, &lst, unix.AT_SYMLINK_NOFOLLOW) == nil && (!ok || (fileID{lst.Dev, lst.Ino}) != id) {
				out = append(out, g)
				continue
			}
		}
		if changed(g) || isDirBeneath(rfd, g) && (changed(path.Join(g, "config")) || changed(path.Join(g, "config.worktree")) || changed(path.Join(g, "commondir"))) {
			out = append(out, g)
		}
	}
	return out, nil
}

// gitlinksAt returns the gitlinks of the repository at dir (below rfd), each with the identity
// of its .git (zero: none). With no index, or one that cannot be read, there are none the user had:
// a call could remove the index first, and every gitlink its sweep then finds is the call's.
// Run as the caller.
func (c *gitlinkCache) gitlinksAt(tenant uint32, rfd int, dir string) map[string]fileID {
	got, _, ok := c.read(tenant, rfd, path.Join(dir, ".git", "index"))
	if !ok || got.err != nil {
		return map[string]fileID{}
	}
	out := make(map[string]fileID, len(got.links))
	for _, l := range got.links {
		var st unix.Stat_t
		if filepath.IsLocal(l) && unix.Fstatat(rfd, path.Join(dir, l, ".git"), &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			out[l] = fileID{st.Dev, st.Ino}
		} else {
			out[l] = fileID{}
		}
	}
	return out
}

// fileID is a file's device and inode number; zero for none.
type fileID struct{ dev, ino uint64 }

// read returns the gitlinks of the index idx (below rfd), from the cache while stat says the
// same of it; false when there is no index. Run as the caller, at tenant's share (Spec.tenant).
func (c *gitlinkCache) read(tenant uint32, rfd int, idx string) (indexLinks, unix.Stat_t, bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(rfd, idx, &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT || err == unix.ENOTDIR {
		return indexLinks{}, st, false
	} else if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		// A link git follows to an index elsewhere (ln -s ../x .git/index), or one the
		// sweep cannot look at: an index whose gitlinks cannot be read, not none.
		return indexLinks{err: fmt.Errorf("%s is no regular file the sweep can read", idx)}, st, true
	}
	key := indexKey{st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano()}
	c.mu.Lock()
	got, ok := c.m[key]
	c.mu.Unlock()
	if !ok {
		// A user's indexes are read one at a time, and the read is the daemon's CPU spent
		// for them, charged to their share as their pattern walks are (a call that finds the
		// share spent is refused in its plan, lookAround): a 256 MB index rewritten by each
		// call would otherwise keep a CPU and as many buffers as calls busy.
		defer indexReads.lock(tenant)()
		began := threadCPU()
		got.links, got.err = readGitlinks(rfd, idx)
		walkShare.charge(tenant, threadCPU()-began)
		n := 0
		for _, l := range got.links {
			n += len(l) + linkOverhead
		}
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxCachedIndexes || c.bytes+n > maxCachedLinkBytes {
			c.m, c.bytes = map[indexKey]indexLinks{}, 0
		}
		c.m[key] = got
		c.bytes += n
		c.mu.Unlock()
	}
	return got, st, true
}

// readGitlinks reads the index idx (below rfd) and, for a split index, the shared index it
// names, and returns the gitlinks of both: one the split index deleted is looked at too.
func readGitlinks(rfd int, idx string) ([]string, error) {
	links, shared, err := readIndexFile(rfd, idx)
	if err != nil {
		return nil, err
	}
	if shared != "" {
		more, _, err := readIndexFile(rfd, path.Join(path.Dir(idx), shared))
		if err != nil {
			return nil, err
		}
		links = append(links, more...)
	}
	return links, nil
}

// readIndexFile opens the index rel below rfd, reached without a symlink or a step out, and
// reads its gitlinks (indexGitlinks). A file over maxIndexBytes, or one with a hole (git writes
// none; a sparse file of 256 MB costs its maker nothing), is not read.
func readIndexFile(rfd int, rel string) ([]string, string, error) {
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV})
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, "", fmt.Errorf("%s is no regular file", rel)
	}
	if st.Size > maxIndexBytes {
		return nil, "", fmt.Errorf("%s is %d bytes, over the %d a sweep reads", rel, st.Size, maxIndexBytes)
	}
	if hole, err := unix.Seek(fd, 0, unix.SEEK_HOLE); err == nil && hole < st.Size {
		return nil, "", fmt.Errorf("%s has a hole at %d: no index git writes", rel, hole)
	}
	// The section ends where the file did: one that grows while it is read is not read on.
	links, shared, ok := indexGitlinks(io.NewSectionReader(f, 0, st.Size), st.Size)
	if !ok {
		return nil, "", fmt.Errorf("%s is no index git writes, or holds a path longer than %d bytes or more submodule paths than a sweep keeps", rel, maxIndexName)
	}
	return links, shared, nil
}
