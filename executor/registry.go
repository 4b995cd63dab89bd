package executor

import (
	"fmt"
	"sort"
	"strings"
)

// Registry is the single source of truth for the tools the daemon offers.
type Registry struct {
	tools  []*Tool
	byName map[string]*Tool
}

// NewRegistry builds a registry from defs; a duplicate name or alias is an error.
func NewRegistry(defs ...Def) (*Registry, error) {
	r := &Registry{byName: map[string]*Tool{}}
	for _, d := range defs {
		if err := r.Add(d); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Add registers one more tool.
func (r *Registry) Add(d Def) error {
	t, err := New(d)
	if err != nil {
		return err
	}
	for _, n := range append([]string{t.Name()}, t.Aliases()...) {
		if _, dup := r.byName[n]; dup {
			return fmt.Errorf("tool name %q registered twice", n)
		}
	}
	for _, n := range append([]string{t.Name()}, t.Aliases()...) {
		r.byName[n] = t
	}
	r.tools = append(r.tools, t)
	return nil
}

// Lookup finds a tool by name or alias.
func (r *Registry) Lookup(name string) (*Tool, bool) {
	t, ok := r.byName[name]
	return t, ok
}

// Pool is the tool list sent to clients: enabled tools not hidden by a bare-name deny,
// built-ins sorted by name, then external (MCP) tools sorted by name — two partitions, so
// a new MCP tool never reorders the built-ins (clients cache on that prefix).
func (r *Registry) Pool(hidden func(name string) bool) []*Tool {
	var builtin, external []*Tool
	for _, t := range r.tools {
		if !t.IsEnabled() || (hidden != nil && hidden(t.Name())) {
			continue
		}
		if t.External() {
			external = append(external, t)
		} else {
			builtin = append(builtin, t)
		}
	}
	byName := func(ts []*Tool) {
		sort.Slice(ts, func(i, j int) bool { return ts[i].Name() < ts[j].Name() })
	}
	byName(builtin)
	byName(external)
	return append(builtin, external...)
}

// Suggest returns the registered names closest to name, for "unknown tool" errors.
func (r *Registry) Suggest(name string) []string {
	type cand struct {
		name string
		dist int
	}
	var cs []cand
	lower := strings.ToLower(name)
	for n := range r.byName {
		d := editDistance(lower, strings.ToLower(n))
		if d <= max(2, len(name)/3) || strings.Contains(strings.ToLower(n), lower) && lower != "" {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].dist != cs[j].dist {
			return cs[i].dist < cs[j].dist
		}
		return cs[i].name < cs[j].name
	})
	out := make([]string, 0, 3)
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance of two short names.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
