package permission

import "strings"

// inheritedPrefix starts the Origin of a rule a session has from its parent chain, naming
// the session whose rule set it was first taken from.
const inheritedPrefix = "inherited from session "

// Inheritable is what a sub-agent of rs's session is decided by besides its own rules
// (LoadOptions.Inherited): every deny and ask rule of rs, of every source (its settings
// files' too: the child's root, whose files it reads, may be another project's), and its
// session allow rules. A path rule anchored at the session's root or home, or at its
// settings file's root, comes as the absolute rule it is here, once for each name of where
// it points (AbsPatterns): read again against the child's root, `Edit(./sub/x/**)` of a parent
// at ~/p meant ~/p/sub/sub/x/** to a child at ~/p/sub.
//
// Other allow rules are left out, as before: the child reads its own project's and its
// owner's files, and fewer allows only narrow. parent names rs's session, for the rules'
// Origin.
func (rs *RuleSet) Inheritable(parent string) []Rule {
	var out []Rule
	for _, r := range rs.rules {
		if r.Behavior == Allow && r.Source != SourceSession {
			continue
		}
		if !strings.HasPrefix(r.Origin, inheritedPrefix) {
			r.Origin = inheritedPrefix + parent + ": " + r.Origin
		}
		if r.Kind != KindPath || r.Anchor == AnchorRoot || r.Anchor == AnchorAnywhere {
			out = append(out, r)
			continue
		}
		pats, ok := r.AbsPatterns(rs.anchors)
		if !ok {
			// An unknown anchor is the owner's home, the child's too: the child widens a
			// deny or ask and drops an allow as the parent did.
			out = append(out, r)
			continue
		}
		for _, p := range pats {
			a := r
			a.Anchor, a.Pattern, a.Content, a.Root = AnchorRoot, p, "/"+p, "/"
			out = append(out, a)
		}
	}
	return out
}

// newInherited is the inherited rules that add to own (the rules a session loaded itself):
// one whose every absolute pattern, or whose text, a rule of own of the same behavior and
// tool already has is left out, so a child does not count its owner's settings, or the
// admin's, twice against the rules it may hold.
func newInherited(own, inherited []Rule, a Anchors) []Rule {
	keys := func(r Rule) []string {
		prefix := string(r.Behavior) + "\x00" + r.Tool + "\x00" + string(r.Kind) + "\x00"
		if r.Kind == KindPath {
			if pats, ok := r.AbsPatterns(a); ok {
				for i, p := range pats {
					pats[i] = prefix + p
				}
				return pats
			}
		}
		return []string{prefix + r.Content}
	}
	have := map[string]bool{}
	for _, r := range own {
		for _, k := range keys(r) {
			have[k] = true
		}
	}
	var out []Rule
	for _, r := range inherited {
		fresh := false
		for _, k := range keys(r) {
			if !have[k] {
				fresh = true
			}
			have[k] = true
		}
		if fresh {
			out = append(out, r)
		}
	}
	return out
}
