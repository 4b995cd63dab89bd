package daemon

import (
	"fmt"
	"os/user"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/session"
)

// identities turns peer credentials into a Caller: name, home, supplementary groups and
// whether it is an admin. Lookups are cached briefly; group changes take effect within ttl.
type identities struct {
	ttl time.Duration

	mu         sync.Mutex
	adminGroup string
	cache      map[uint32]cachedCaller
}

type cachedCaller struct {
	c   session.Caller
	exp time.Time
}

// setAdminGroup changes the admin group (config reload) and forgets cached answers.
func (ids *identities) setAdminGroup(g string) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if g != ids.adminGroup {
		ids.adminGroup = g
		ids.cache = map[uint32]cachedCaller{}
	}
}

func newIdentities(adminGroup string) *identities {
	return &identities{adminGroup: adminGroup, ttl: 30 * time.Second, cache: map[uint32]cachedCaller{}}
}

// Identify resolves a peer. An uid without a passwd entry is still served (it may run
// tools as itself), with no name and "/" as home.
func (ids *identities) Identify(p api.Peer) (session.Caller, error) {
	ids.mu.Lock()
	cc, ok := ids.cache[p.UID]
	ids.mu.Unlock()
	if ok && time.Now().Before(cc.exp) {
		c := cc.c
		c.PID = p.PID
		c.GID = p.GID
		return c, nil
	}
	c := session.Caller{UID: p.UID, GID: p.GID, PID: p.PID, Home: "/"}
	if u, err := user.LookupId(strconv.FormatUint(uint64(p.UID), 10)); err == nil {
		c.User, c.Home = u.Username, u.HomeDir
		if gids, err := u.GroupIds(); err == nil {
			for _, g := range gids {
				n, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return session.Caller{}, fmt.Errorf("group id %q of uid %d is not numeric", g, p.UID)
				}
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	c.Admin = p.UID == 0 || ids.inAdminGroup(c)
	ids.mu.Lock()
	ids.cache[p.UID] = cachedCaller{c: c, exp: time.Now().Add(ids.ttl)}
	ids.mu.Unlock()
	return c, nil
}

func (ids *identities) inAdminGroup(c session.Caller) bool {
	ids.mu.Lock()
	name := ids.adminGroup
	ids.mu.Unlock()
	g, err := user.LookupGroup(name)
	if err != nil {
		return false
	}
	gid, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return false
	}
	if c.GID == uint32(gid) {
		return true
	}
	for _, x := range c.Groups {
		if x == uint32(gid) {
			return true
		}
	}
	return false
}
