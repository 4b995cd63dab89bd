package executor

import (
	"context"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
)

// ruleLink is a link at the literal start of a deny or ask path rule: start, as the rule
// names it, leads to target, resolved as the session's owner when the call is decided.
type ruleLink struct{ start, target string }

// ruleLinkLookups is how many of a call's rule starts are looked up at once.
const ruleLinkLookups = 32

// ruleLinks finds the links at the literal starts of the session's deny and ask path rules:
// a rule written through a link (`Read(./cfg/**)`, cfg a link in the project to ~/realcfg)
// names the place the link leads. The sandbox's plan hides that place for each Bash call; the
// decision must hold it too, for every tool and for the calls an agent runs itself, and the
// link may have been made or moved since the session's rules were read, so it is looked up
// for each call, as the owner. A start that cannot be looked up (not there, not searchable
// by the owner) leads nowhere the owner's programs could reach through it.
func (h *Host) ruleLinks(ctx context.Context, c *Call) ([]ruleLink, error) {
	starts, err := ruleStarts(c)
	if err != nil || len(starts) == 0 {
		return nil, err
	}
	targets := make([]string, len(starts))
	errs := make([]error, len(starts))
	if c.unconfined {
		rs, es := h.resolveAllOnHost(c, starts)
		for i := range starts {
			if errs[i] = es[i]; es[i] == nil && rs[i] != nil {
				targets[i] = rs[i].Resolved
			}
		}
	} else {
		// Asked together, a few dozen cost the worker about one round trip.
		var wg sync.WaitGroup
		slots := make(chan struct{}, ruleLinkLookups)
		for i, st := range starts {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				targets[i], _, errs[i] = h.Resolve(ctx, c.Session, st)
			})
		}
		wg.Wait()
	}
	var links []ruleLink
	for i, st := range starts {
		switch errcode.Of(errs[i]) {
		case errcode.OK:
		case errcode.ErrnoENOENT, errcode.ErrnoEACCES, errcode.ErrnoENOTDIR, errcode.ErrnoELOOP:
			continue
		default:
			return nil, errs[i]
		}
		if t := path.Clean(targets[i]); targets[i] != "" && t != st {
			links = append(links, ruleLink{start: st, target: t})
		}
	}
	return links, nil
}

// ruleStarts are the literal starts of the session's deny and ask path rules: each pattern's
// directories up to its first with a wildcard or an escape, `/` left out (it leads nowhere
// else).
func ruleStarts(c *Call) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, behavior := range []string{"deny", "ask"} {
		pats, err := pathPatterns(c, behavior, allPathBuckets(c, behavior)...)
		if err != nil {
			return nil, err
		}
		for _, p := range pats {
			st := literalStart(p)
			if st == "/" || seen[st] {
				continue
			}
			seen[st] = true
			out = append(out, st)
		}
	}
	return out, nil
}

// literalStart is an absolute pattern's leading run of segments with no wildcard or escape.
func literalStart(pattern string) string {
	segs := strings.Split(path.Clean(pattern), "/")
	for i, seg := range segs {
		if strings.ContainsAny(seg, `*?[{\`) {
			segs = segs[:i]
			break
		}
	}
	if st := strings.Join(segs, "/"); st != "" {
		return st
	}
	return "/"
}

// allPathBuckets names every path rule bucket of the session's behavior rules.
func allPathBuckets(c *Call, behavior string) []string {
	rs := c.Session.RuleSet()
	if rs == nil {
		return nil
	}
	rules, _ := rs.Data()[behavior].(map[string]any)
	paths, _ := rules["paths"].(map[string][]any)
	out := make([]string, 0, len(paths))
	for k := range paths {
		out = append(out, k)
	}
	return out
}

// namesPaths reports whether c's facts may name paths: a Bash line with none (`ls`, `git
// status`) needs no rule's link looked up.
func namesPaths(c *Call) bool {
	if c.Tool.Name() != "Bash" {
		return true
	}
	cl := c.Classification()
	return cl == nil || len(cl.Paths) > 0 || cl.PathsIncomplete
}

// aliasThroughLinks gives each path its names through links: where a path (as requested, or
// resolved) lies under a link's target, the same place named through the link's start. For a
// call its caller runs itself, a path above a link's target (a whole tree read, `grep -r` of
// the dir that holds it) is named as the link too, so a rule below the link meets it as it
// would meet the target's own dir; a call the daemon runs holds such a rule in the kernel, and
// in the searches it runs (heldThroughLinks).
func aliasThroughLinks(paths []permission.PathFact, links []ruleLink, unconfined bool) {
	add := func(f *permission.PathFact, alias string) {
		if alias != f.Requested && alias != f.Resolved && !slices.Contains(f.Aliases, alias) {
			f.Aliases = append(f.Aliases, alias)
		}
	}
	for i := range paths {
		f := &paths[i]
		for _, l := range links {
			for _, name := range []string{f.Requested, f.Resolved} {
				if insideDir(name, l.target) {
					add(f, path.Join(l.start, strings.TrimPrefix(name, l.target)))
				} else if unconfined && insideDir(l.target, name) {
					add(f, l.start)
				}
			}
		}
	}
}

// heldThroughLinks is patterns, and beside each that starts at a link's start the same pattern
// at the link's target: what a search run by the daemon must not list or print is held where
// the rules' links lead too.
func heldThroughLinks(patterns []string, links []ruleLink) []string {
	out := patterns
	for _, p := range patterns {
		for _, l := range links {
			if rest, ok := strings.CutPrefix(p, l.start); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
				if q := permission.LiteralPath(l.target) + rest; !slices.Contains(out, q) {
					out = append(out, q)
				}
			}
		}
	}
	return out
}
