package daemon

import (
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/session"
)

// identities turns peer credentials into a Caller: name, home, supplementary groups and
// whether it is an admin. Lookups are cached briefly; group changes take effect within ttl.
type identities struct {
	ttl time.Duration

	// names holds name and home by uid, for ttl.
	names *expirable.LRU[uint32, session.Caller]

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
	return &identities{adminGroup: adminGroup, ttl: ttl, names: expirable.NewLRU[uint32, session.Caller](maxNames, nil, ttl)}
}

// Identify resolves a peer. Name and home come from NSS (cached); gid and supplementary
// groups are the peer's own, from the kernel, so a group dropped before connecting is not
// given back to the tools that run as the caller, nor counted for the admin group. An uid
// without a passwd entry is still served (it may run tools as itself), with no name and "/"
// as home.
func (ids *identities) Identify(p api.Peer) (session.Caller, error) {
	c, ok := ids.names.Get(p.UID)
	if !ok {
		c = session.Caller{UID: p.UID, Home: "/"}
		if u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10)); err == nil {
			c.User, c.Home = u.Username, u.HomeDir
		}
		ids.names.Add(p.UID, c)
	}
	c.PID, c.GID = p.PID, p.GID
	c.Groups = append([]uint32(nil), p.Groups...)
	c.Admin = p.UID == 0 || ids.inAdminGroup(c)
	return c, nil
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
		if n, err := strconv.ParseUint(g.Gid, 10, 32); err == nil {
			ids.adminGid, ids.adminOK = uint32(n), true
		}
	}
	ids.adminExp = time.Now().Add(ids.ttl)
	return ids.adminGid, ids.adminOK
}
