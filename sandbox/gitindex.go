package sandbox

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
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
// maxIndexLinkBytes the gitlink paths one index may hold (thousands of submodules): an index
// is the user's file, and what the root daemon keeps of it must not grow with its content.
const (
	maxIndexName      = 4096
	maxIndexLinkBytes = 1 << 20
)

// indexGitlinks returns the paths of the gitlinks an index file lists, and the name of the
// shared index a split index names ("" when none); false when b is no index it can read.
func indexGitlinks(b []byte) (links []string, shared string, ok bool) {
	// The trailing checksum says the hash (SHA-1 or SHA-256); an index written without one
	// (index.skipHash) is tried as either.
	for _, n := range []int{sha1.Size, sha256.Size} {
		if len(b) < 12+n {
			continue
		}
		body, sum := b[:len(b)-n], b[len(b)-n:]
		var match bool
		if n == sha1.Size {
			s := sha1.Sum(body)
			match = bytes.Equal(s[:], sum)
		} else {
			s := sha256.Sum256(body)
			match = bytes.Equal(s[:], sum)
		}
		if match || bytes.Count(sum, []byte{0}) == n {
			if links, shared, ok := parseIndex(body, n); ok {
				return links, shared, true
			}
		}
	}
	return nil, "", false
}

// parseIndex reads the entries (version 2, 3 or 4) of an index without its checksum, with
// object ids oidLen bytes long, and its extensions for a split index's link.
func parseIndex(b []byte, oidLen int) (links []string, shared string, ok bool) {
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return nil, "", false
	}
	ver := binary.BigEndian.Uint32(b[4:8])
	count := binary.BigEndian.Uint32(b[8:12])
	if ver < 2 || ver > 4 || uint64(count) > uint64(len(b)) {
		return nil, "", false
	}
	off := 12
	hdr := 40 + oidLen + 2 // times, dev, ino, mode, uid, gid, size; the oid; flags
	var prev []byte
	linkBytes := 0
	for range count {
		if off+hdr > len(b) {
			return nil, "", false
		}
		mode := binary.BigEndian.Uint32(b[off+24 : off+28])
		flags := binary.BigEndian.Uint16(b[off+40+oidLen:])
		p := off + hdr
		if flags&0x4000 != 0 { // extended flags
			if ver < 3 || p+2 > len(b) {
				return nil, "", false
			}
			p += 2
		}
		var name []byte
		if ver == 4 {
			strip, n := gitVarint(b[p:])
			if n == 0 || strip > uint64(len(prev)) {
				return nil, "", false
			}
			p += n
			nul := bytes.IndexByte(b[p:], 0)
			if nul < 0 || len(prev)-int(strip)+nul > maxIndexName {
				return nil, "", false
			}
			// In place: each name is the one before it, cut, plus its own suffix. Built
			// afresh for each entry, a file of names one byte longer each took time and
			// memory in the square of its entries.
			name = append(prev[:len(prev)-int(strip)], b[p:p+nul]...)
			off = p + nul + 1
		} else {
			nul := bytes.IndexByte(b[p:], 0)
			if nul < 0 {
				return nil, "", false
			}
			if nul > maxIndexName {
				return nil, "", false
			}
			name = b[p : p+nul]
			off += (p - off + nul + 8) &^ 7 // NUL-padded to a multiple of eight
			if off > len(b) {
				return nil, "", false
			}
		}
		if mode>>12 == 0o16 { // 0160000: a gitlink
			if linkBytes += len(name); linkBytes > maxIndexLinkBytes {
				return nil, "", false
			}
			links = append(links, string(name))
		}
		prev = name
	}
	// Extensions: a four-byte signature and a four-byte size each; "link" names the shared
	// index whose entries a split index adds to.
	for off+8 <= len(b) {
		sig, size := string(b[off:off+4]), int(binary.BigEndian.Uint32(b[off+4:off+8]))
		if size < 0 || off+8+size > len(b) {
			return nil, "", false
		}
		if sig == "link" {
			if size < oidLen {
				return nil, "", false
			}
			shared = "sharedindex." + hex.EncodeToString(b[off+8:off+8+oidLen])
		}
		off += 8 + size
	}
	if off != len(b) {
		return nil, "", false
	}
	return links, shared, true
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
	bytes int // of the paths m holds
}

type indexLinks struct {
	links []string
	err   error
}

type indexKey struct {
	dev, ino          uint64
	size, mtime, ctim int64
}

// maxCachedIndexes and maxCachedLinkBytes bound the cache; past either, it starts over.
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
func (c *gitlinkCache) gitlinkGits(rfd int, dir string, since time.Time, had map[string]fileID) ([]string, error) {
	idx := path.Join(dir, ".git", "index")
	got, st, ok := c.read(rfd, idx)
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
func (c *gitlinkCache) gitlinksAt(rfd int, dir string) map[string]fileID {
	got, _, ok := c.read(rfd, path.Join(dir, ".git", "index"))
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
// same of it; false when there is no index.
func (c *gitlinkCache) read(rfd int, idx string) (indexLinks, unix.Stat_t, bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(rfd, idx, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return indexLinks{}, st, false
	}
	key := indexKey{st.Dev, st.Ino, st.Size, st.Mtim.Nano(), st.Ctim.Nano()}
	c.mu.Lock()
	got, ok := c.m[key]
	c.mu.Unlock()
	if !ok {
		got.links, got.err = readGitlinks(rfd, idx)
		n := 0
		for _, l := range got.links {
			n += len(l)
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
	b, ok := readBeneathMax(rfd, idx, maxIndexBytes)
	if !ok {
		return nil, fmt.Errorf("read %s", idx)
	}
	links, shared, ok := indexGitlinks(b)
	if !ok {
		return nil, fmt.Errorf("%s is no index git writes, or holds a path longer than %d bytes or more than %d bytes of submodule paths", idx, maxIndexName, maxIndexLinkBytes)
	}
	if shared != "" {
		sb, ok := readBeneathMax(rfd, path.Join(path.Dir(idx), shared), maxIndexBytes)
		if !ok {
			return nil, fmt.Errorf("read the shared index %s", shared)
		}
		more, _, ok := indexGitlinks(sb)
		if !ok {
			return nil, fmt.Errorf("%s is no index git writes", shared)
		}
		links = append(links, more...)
	}
	return links, nil
}
