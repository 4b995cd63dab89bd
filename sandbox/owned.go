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

// ownedChain walks p as the kernel resolves it, one name at a time from /: each name it
// passes (a link as the link, then what it leads to, a .. from where the walk is, not from
// the text) must be uid's (a dir root's too), sit in a dir no one else may change the entries
// of, and carry no ACL another may write by; the file it ends at must be uid's and written by
// no one else. So a link in the middle of a chain (another user's link the first leads to, or
// one a .. then climbs out of) is judged as the first is. Run as the caller.
func ownedChain(uid uint32, p string) (owner uint32, why string) {
	cur := "/"
	var curSt unix.Stat_t
	if err := unix.Lstat(cur, &curSt); err != nil {
		return uid, fmt.Sprintf("/ could not be looked at: %v", err)
	}
	if w := aclWriters(cur, uid, curSt.Gid); w != "" {
		return uid, w
	}
	todo := strings.Split(p, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur) // a dir the walk passed: judged already
			if err := unix.Lstat(cur, &curSt); err != nil {
				return uid, fmt.Sprintf("%s could not be looked at: %v", cur, err)
			}
			continue
		}
		name := filepath.Join(cur, c)
		var st unix.Stat_t
		if err := unix.Lstat(name, &st); err != nil {
			return uid, fmt.Sprintf("%s could not be looked at: %v", name, err)
		}
		if why := othersMayChange(cur, curSt, st, uid); why != "" {
			return uid, why
		}
		kind := st.Mode & unix.S_IFMT
		last := len(todo) == 0 || strings.Trim(strings.Join(todo, ""), "/") == ""
		// Root's dir is no one else's to change; root's file may hold text a user chose
		// (the daemon keeps such), and root's link is no more the caller's choice.
		if st.Uid != uid && (kind != unix.S_IFDIR || st.Uid != 0 || last) {
			return st.Uid, fmt.Sprintf("%s is uid %d's", name, st.Uid)
		}
		if kind == unix.S_IFLNK {
			if hops++; hops > maxLinkHops {
				return uid, fmt.Sprintf("%s: more than %d links on the way", p, maxLinkHops)
			}
			target, err := os.Readlink(name)
			if err != nil {
				return uid, fmt.Sprintf("%s could not be read: %v", name, err)
			}
			if filepath.IsAbs(target) {
				cur = "/"
				if err := unix.Lstat(cur, &curSt); err != nil {
					return uid, fmt.Sprintf("/ could not be looked at: %v", err)
				}
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		}
		if w := aclWriters(name, uid, st.Gid); w != "" {
			return uid, w
		}
		if last {
			if w := ownWriters(st, uid); w != 0 {
				return uid, fmt.Sprintf("%s is writable by %s (mode %04o)", name, writers(w, st.Gid), st.Mode&0o7777)
			}
			return uid, ""
		}
		if kind != unix.S_IFDIR {
			return uid, fmt.Sprintf("%s is not a directory", name)
		}
		cur, curSt = name, st
	}
	return uid, fmt.Sprintf("%s names no file", p)
}

// ownWriters are the write bits of st for others than uid: its group's (unless the group is
// uid's own private one) and everyone's.
func ownWriters(st unix.Stat_t, uid uint32) uint32 {
	w := st.Mode & 0o022
	if w == 0o020 && privateGroup(st.Gid, uid) {
		w = 0
	}
	return w
}

// othersMayChange says how someone other than uid may change the entry (entry) of dir: the
// dir is writable by them, unless its sticky bit keeps them from the entry (uid's or root's).
func othersMayChange(dir string, dirSt, entry unix.Stat_t, uid uint32) string {
	w := ownWriters(dirSt, uid)
	if w == 0 || dirSt.Mode&unix.S_ISVTX != 0 && (entry.Uid == uid || entry.Uid == 0) {
		return ""
	}
	return fmt.Sprintf("%s is writable by %s (mode %04o)", dir, writers(w, dirSt.Gid), dirSt.Mode&0o7777)
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
