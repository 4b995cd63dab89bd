package daemon

import (
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/subid"
	"github.com/sandboxd/sandboxd/session"
)

// identities turns peer credentials into a Caller: name, home, supplementary groups and
// whether it is an admin. Lookups are cached briefly; group changes take effect within ttl.
type identities struct {
	ttl time.Duration

	// names holds name and home by uid, for ttl.
	names *expirable.LRU[uint32, session.Caller]

	// subuids and subgids are the users' subordinate id ranges: a subordinate uid counts
	// against its owner's limits, and is never an admin.
	subuids, subgids *subid.Table

	mu         sync.Mutex
	adminGroup string
	adminGid   uint32
	adminOK    bool
	adminExp   time.Time
}

// maxNames bounds the uids whose names are remembered.
const maxNames = 4096

// setAdminGroup changes the admin group (config reload) and forgets cached answers.
func (ids *identities) setAdminGroup(g string) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if g != ids.adminGroup {
		ids.adminGroup = g
		ids.names.Purge()
		ids.adminExp = time.Time{}
	}
}

func newIdentities(adminGroup string) *identities {
	const ttl = 30 * time.Second
	return &identities{adminGroup: adminGroup, ttl: ttl, names: expirable.NewLRU[uint32, session.Caller](maxNames, nil, ttl),
		subuids: subid.Open("/etc/subuid"), subgids: subid.Open("/etc/subgid")}
}

// Identify resolves a peer. Name and home come from NSS (cached); gid and supplementary
// groups are the peer's own, from the kernel, so a group dropped before connecting is not
// given back to the tools that run as the caller, nor counted for the admin group. An uid
// without a passwd entry is still served (it may run tools as itself), with no name and "/"
// as home. One in a user's subordinate range (a process in a user namespace that user made)
// counts against that user's limits and is no admin, whatever groups it maps.
func (ids *identities) Identify(p api.Peer) (session.Caller, error) {
	c, ok := ids.names.Get(p.UID)
	if !ok {
		c = session.Caller{UID: p.UID, Home: "/"}
		if u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10)); err == nil {
			c.User, c.Home = u.Username, u.HomeDir
		}
		c.RangeOwner, _ = ids.subuids.Owner(p.UID)
		ids.names.Add(p.UID, c)
	}
	c.PID, c.GID = p.PID, p.GID
	c.Groups = append([]uint32(nil), p.Groups...)
	c.Admin = p.UID == 0 || c.RangeOwner == 0 && ids.inAdminGroup(c)
	return c, nil
}

// Tenant is the uid whose limits uid counts against (session.Caller.Tenant), for the socket's
// connection cap, which counts a peer before its request names anything.
func (ids *identities) Tenant(uid uint32) uint32 {
	if c, ok := ids.names.Get(uid); ok {
		return c.Tenant()
	}
	if owner, ok := ids.subuids.Owner(uid); ok {
		return owner
	}
	return uid
}

func (ids *identities) inAdminGroup(c session.Caller) bool {
	gid, ok := ids.adminGID()
	if !ok {
		return false
	}
	return c.GID == gid || slices.Contains(c.Groups, gid)
}

// adminGID is the admin group's gid, looked up at most once per ttl: membership is the
// peer's own groups, so only the name-to-gid step needs NSS.
func (ids *identities) adminGID() (uint32, bool) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if time.Now().Before(ids.adminExp) {
		return ids.adminGid, ids.adminOK
	}
	ids.adminGid, ids.adminOK = 0, false
	if g, err := user.LookupGroup(ids.adminGroup); err == nil {
		// A gid in a user's subordinate range is one that user can hold in a user namespace
		// (newgidmap, then setgroups): such a group makes no one an admin.
		if n, err := strconv.ParseUint(g.Gid, 10, 32); err == nil && !ids.subgids.Holds(uint32(n)) {
			ids.adminGid, ids.adminOK = uint32(n), true
		}
	}
	ids.adminExp = time.Now().Add(ids.ttl)
	return ids.adminGid, ids.adminOK
}
