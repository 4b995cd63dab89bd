package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OwnedAlone says, as the caller (uid, gid, groups) finds them, whether what the file at path
// holds is uid's choice alone: the file and each name on the way to it from /, each looked at
// itself (a link as the link), and, where the path goes through a link, every path the
// kernel passes through to resolve it, one link at a time (ownedChain). The file and a link on the way must be uid's, a dir uid's or
// root's; no file or dir may be writable by its group or by others, nor carry an ACL that lets
// another user or group write it. A dir writable by others is accepted only with its sticky
// bit set and for an entry of uid's or root's (no one else may then rename or remove it): a
// project in /tmp. Group write is no one else's when the group is uid's own private one (no
// members, no other user's primary group), as umask 002 systems make them.
//
// The dirs above top count as much as those below: one others may write (a team's setgid
// dir holding the project) lets them rename the project away and theirs in, between any look
// and the read of the file; and the file's content, read through the session's worker, may
// then be what their dir held. top is the project's dir (or the home) the file belongs to:
// every name is judged from / whatever it is.
//
// owner is the owner of the first name that is another's (uid when none is), why what lets
// another change the file ("" when nothing does). A name it cannot look at counts against it:
// what the caller trusts must be shown to be its own alone, as in a shared dir anyone may
// write .sandboxd/settings.json, or rewrite a group-writable one the caller made.
func OwnedAlone(uid, gid uint32, groups []uint32, top, path string) (owner uint32, why string, err error) {
	owner = uid
	err = asCaller(uid, gid, groups, func() { owner, why = ownedChain(uid, filepath.Clean(path)) })
	return owner, why, err
}

// maxLinkHops bounds the links followed on the way to a file, as the kernel's 40.
const maxLinkHops = 40

// ownedChain walks p as the kernel resolves it, one link at a time: each path it passes
// through has every name on it checked (ownedAlone), so a link in the middle of a chain (the
// target of a link being another link, or a dir of a target a link) is judged as the first
// is: another user's link there picks what the file is. Run as the caller.
func ownedChain(uid uint32, p string) (owner uint32, why string) {
	for hop := 0; ; hop++ {
		if hop > maxLinkHops {
			return uid, fmt.Sprintf("%s: more than %d links on the way", p, maxLinkHops)
		}
		if owner, why = ownedAlone(uid, "/", p); why != "" {
			return owner, why
		}
		next, linked, err := firstLink(p)
		switch {
		case err != nil:
			return uid, fmt.Sprintf("where %s leads could not be found: %v", p, err)
		case !linked:
			return uid, ""
		}
		p = next
	}
}

// firstLink replaces the first name of p, from /, that is a symbolic link with what it leads
// to; false when none is.
func firstLink(p string) (string, bool, error) {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		name := "/" + strings.Join(parts[:i+1], "/")
		var st unix.Stat_t
		if err := unix.Lstat(name, &st); err != nil {
			return "", false, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			continue
		}
		target, err := os.Readlink(name)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(name), target)
		}
		return filepath.Clean(filepath.Join(append([]string{target}, parts[i+1:]...)...)), true, nil
	}
	return p, false, nil
}

// ownedAlone is OwnedAlone's check of the names from p up to top (up to / when top does not
// hold p), each looked at itself, links not followed. Run as the caller.
func ownedAlone(uid uint32, top, p string) (owner uint32, why string) {
	var below unix.Stat_t // the name checked before, in the dir checked now
	for name := p; ; name = filepath.Dir(name) {
		var st unix.Stat_t
		if err := unix.Lstat(name, &st); err != nil {
			return uid, fmt.Sprintf("%s could not be looked at: %v", name, err)
		}
		kind := st.Mode & unix.S_IFMT
		// Root's dir is no one else's to change; root's file may hold text a user chose
		// (the daemon keeps such), and root's link is no more the caller's choice.
		if st.Uid != uid && (name == p || kind != unix.S_IFDIR || st.Uid != 0) {
			return st.Uid, fmt.Sprintf("%s is uid %d's", name, st.Uid)
		}
		if kind != unix.S_IFLNK {
			w := st.Mode & 0o022
			if w == 0o020 && privateGroup(st.Gid, uid) {
				w = 0
			}
			if w != 0 {
				// The sticky bit keeps others from renaming or removing an entry they do not
				// own: the one below, if it is the caller's or root's, stays as it was made.
				sticky := kind == unix.S_IFDIR && st.Mode&unix.S_ISVTX != 0 && name != p && (below.Uid == uid || below.Uid == 0)
				if !sticky {
					return uid, fmt.Sprintf("%s is writable by %s (mode %04o)", name, writers(w, st.Gid), st.Mode&0o7777)
				}
			}
			if w := aclWriters(name, uid, st.Gid); w != "" {
				return uid, w
			}
		}
		if name == "/" {
			return uid, ""
		}
		below = st
	}
}

func writers(w, gid uint32) string {
	switch w {
	case 0o020:
		return fmt.Sprintf("group %d", gid)
	case 0o002:
		return "others"
	}
	return fmt.Sprintf("group %d and others", gid)
}

// The tags of a POSIX ACL's entries (acl_ea_entry, linux/posix_acl_xattr.h).
const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclWrite    = 0x02
)

// aclWriters says how name's access ACL lets someone other than uid write it, or "": a named
// user or group entry, or the owning group's, that grants write. Its mask is not relied on
// (it bounds them now, but its owner may raise it). Others' entry is the mode's, checked
// already. An ACL that cannot be read or understood counts against it.
func aclWriters(name string, uid, gid uint32) string {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(name, "system.posix_acl_access", buf)
	if errors.Is(err, unix.ERANGE) {
		if n, err = unix.Lgetxattr(name, "system.posix_acl_access", nil); err == nil {
			buf = make([]byte, n)
			n, err = unix.Lgetxattr(name, "system.posix_acl_access", buf)
		}
	}
	switch {
	case errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP):
		return "" // only the mode's bits, checked already
	case err != nil:
		return fmt.Sprintf("%s: its ACL could not be read: %v", name, err)
	}
	b := buf[:n]
	if len(b) < 4 || (len(b)-4)%8 != 0 || binary.LittleEndian.Uint32(b) != 2 {
		return fmt.Sprintf("%s has an ACL of a form not understood", name)
	}
	for e := b[4:]; len(e) >= 8; e = e[8:] {
		tag, perm, id := binary.LittleEndian.Uint16(e), binary.LittleEndian.Uint16(e[2:]), binary.LittleEndian.Uint32(e[4:])
		switch tag {
		case aclUserObj, aclMask, aclOther:
		case aclUser, aclGroup, aclGroupObj:
			if perm&aclWrite == 0 || tag == aclUser && id == uid || tag == aclGroupObj && privateGroup(gid, uid) {
				continue
			}
			who := "its group"
			switch tag {
			case aclUser:
				who = fmt.Sprintf("user %d", id)
			case aclGroup:
				who = fmt.Sprintf("group %d", id)
			}
			return fmt.Sprintf("%s has an ACL that lets %s write it", name, who)
		default:
			return fmt.Sprintf("%s has an ACL entry not understood (tag %#x)", name, tag)
		}
	}
	return ""
}

// privateGroup reports whether gid is uid's own group alone, by the system's files, as
// user-private-group systems make them: /etc/group gives it uid's user name and no members,
// and /etc/passwd gives it as the primary group of uid and of no one else. A group only a
// directory service knows, or a shared one such as nogroup (which services run as), is not.
func privateGroup(gid, uid uint32) bool {
	users, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return false
	}
	g, u := strconv.FormatUint(uint64(gid), 10), strconv.FormatUint(uint64(uid), 10)
	name := ""
	for _, line := range strings.Split(string(users), "\n") {
		f := strings.Split(line, ":")
		if len(f) < 4 {
			continue
		}
		if f[2] == u {
			name = f[0]
		}
		if f[3] == g && f[2] != u {
			return false // another user's primary group too
		}
	}
	groups, err := os.ReadFile("/etc/group")
	if name == "" || err != nil {
		return false
	}
	found := false
	for _, line := range strings.Split(string(groups), "\n") {
		f := strings.Split(line, ":")
		if len(f) != 4 || f[2] != g {
			continue
		}
		if found || f[0] != name || strings.TrimSpace(f[3]) != "" {
			return false // listed twice, another's name, or with members
		}
		found = true
	}
	return found
}
