package executor

import (
	"context"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/worker"
)

// Trees a command the caller runs itself copies or moves in (cp -r, mv of a dir, rsync) plant
// what they hold where they land, under names no word of the line shows: each source is looked
// through, as its owner and within bounds, for the names the policy protects.

// What one decision may walk of the trees copied or moved in (PathUse.TreeOf), all of them
// together, and of those files how many it puts to the policy: one is enough for its ask.
// Past it, what they plant is known only when they run. A user has one such walk at a time.
const (
	maxPlantedWalk      = 20000
	maxPlantedWalkBytes = 4 << 20
	maxPlanted          = 8
)

// plantedBy returns, for a landing (pu.TreeOf, leading to source; the landing at resolved) of a command the caller runs
// itself, a write fact for each file below the source whose name the policy protects where it
// lands: `cp -r tpl/. .` with tpl/.git/hooks/pre-commit writes .git/hooks/pre-commit, which no
// word of the line names. seen is false for a source it did not look through whole (past b,
// unreadable, or while another walk of the user's runs): what it plants is then known only
// when it runs. Each name is matched by its last segments, where every protected name lies,
// so a name's length costs nothing.
func (h *Host) plantedBy(ctx context.Context, c *Call, pu classifier.PathUse, source *worker.Resolved, resolved string, b *sandbox.WalkBudget, walked map[string]bool) (facts []permission.PathFact, seen bool) {
	if h.Protected == nil || source == nil || !source.Exists || !source.IsDir {
		return nil, true // a file, or nothing yet: the landing is the one write
	}
	src := source.Resolved
	if walked[src+"\x00"+resolved] {
		return nil, true // the same tree to the same place: looked through already
	}
	walked[src+"\x00"+resolved] = true
	o := c.Session.Owner
	if !h.treeWalks.begin(o.UID) {
		return nil, false
	}
	defer h.treeWalks.end(o.UID)
	names, complete, err := sandbox.NamesBelow(ctx, o.UID, o.GID, o.Groups, src, func(rel string) bool {
		return h.Protected(lastSegments(pu.Path+"/"+strings.TrimPrefix(lastSegments(rel, 5), "/"), 5)) ||
			inHomeProgramDir(resolved+"/"+rel, o.Home)
	}, b, maxPlanted)
	if err != nil || !complete {
		return nil, false
	}
	for _, rel := range names {
		facts = append(facts, permission.PathFact{Requested: pu.Path + "/" + rel, Resolved: resolved + "/" + rel, Access: permission.Write})
	}
	return facts, true
}

// homeProgramDirs are what the policy protects in the home alone (safety.rego: on PATH, and
// vim's plugins), which the protected-path pattern, matched on a name's last segments, cannot
// tell from a project's bin/.
var homeProgramDirs = []string{"bin", "go/bin", ".vim"}

// inHomeProgramDir reports whether p lies in one of home's homeProgramDirs.
func inHomeProgramDir(p, home string) bool {
	if home == "" || home == "/" {
		return false
	}
	for _, d := range homeProgramDirs {
		if insideDir(p, home+"/"+d) {
			return true
		}
	}
	return false
}

// lastSegments is p from the start of its nth segment from the end ("/" + it when shorter).
func lastSegments(p string, n int) string {
	i := len(p)
	for ; n > 0 && i > 0; n-- {
		i = strings.LastIndexByte(p[:i], '/')
		if i < 0 {
			return "/" + p
		}
	}
	return p[i:]
}

// oneWalkEach lets each user have one walk of a tree in the daemon at a time.
type oneWalkEach struct{ by sync.Map } // uid -> struct{}

func (w *oneWalkEach) begin(uid uint32) bool {
	_, busy := w.by.LoadOrStore(uid, struct{}{})
	return !busy
}

func (w *oneWalkEach) end(uid uint32) { w.by.Delete(uid) }

// landingSource is where p, a copy's or a move's source, leads for the session owner's own
// process on the host; nil when it cannot be resolved.
func (h *Host) landingSource(c *Call, p string) *worker.Resolved {
	rs, errs := h.resolveAllOnHost(c, []string{p})
	if errs[0] != nil {
		return nil
	}
	return rs[0]
}
