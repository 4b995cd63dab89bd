package permission

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ForeignHit is the first deny rule, else the first ask rule, of rs that names a call of a
// tool sandboxd does not run (an agent's own: Task, WebSearch, NotebookEdit, an MCP
// server's), so that a hook deciding the agent's call holds it as the agent would: by name
// (a bare rule, a tool-name pattern such as mcp__srv or *, and the Edit, Write and Read rules
// that cover NotebookEdit), by parameter (Tool(param:value)), and for NotebookEdit by its
// notebook_path against the writing tools' and Read's path rules. Allow rules are never
// consulted: sandboxd cannot vouch for a tool it does not run. A path rule whose match would
// overrun the call's MatchBudget holds, as it does for a notebook_path it cannot be checked
// against: the rule is then reported as if it matched.
func (rs *RuleSet) ForeignHit(tool string, input map[string]any) (Rule, bool) {
	if rs == nil {
		return Rule{}, false
	}
	// The path is the caller's own and may be any depth: it is split once, and every path
	// rule's match is charged to one budget for the call. Cleaning and splitting it again for
	// each ancestor of each rule cost the daemon 52 s of CPU for a notebook_path of 64 000
	// segments.
	nb := foreignPath{b: NewMatchBudget()}
	if p, _ := input["notebook_path"].(string); tool == "NotebookEdit" && strings.HasPrefix(p, "/") {
		nb.abs, nb.segs = true, SplitPath(p)
	}
	for _, b := range []Behavior{Deny, Ask} {
		for _, r := range rs.rules {
			if r.Behavior == b && rs.foreignMatch(r, tool, input, &nb) {
				return r, true
			}
		}
	}
	return Rule{}, false
}

// foreignPath is a NotebookEdit call's notebook_path, split once for every rule, and the
// budget its matching is charged to.
type foreignPath struct {
	abs  bool // an absolute path: segs holds it
	segs []string
	b    *MatchBudget
}

func (rs *RuleSet) foreignMatch(r Rule, tool string, input map[string]any, nb *foreignPath) bool {
	switch r.Kind {
	case KindAll:
		for _, t := range coveredTools(r) {
			if t == tool {
				return true
			}
		}
	case KindTool:
		return MatchGlob(r.Pattern, tool)
	case KindParam:
		if r.Tool != tool {
			return false
		}
		var s string
		switch v := input[r.Param].(type) {
		case string:
			s = v
		case bool, float64, json.Number:
			s = fmt.Sprint(v)
		default:
			return false // absent, or not a top-level scalar
		}
		return MatchGlob(r.Pattern, s)
	case KindPath:
		if tool != "NotebookEdit" {
			return false
		}
		switch r.Tool {
		case "Edit", "Write", "MultiEdit", "NotebookEdit", "Read":
		default:
			return false
		}
		if !nb.abs {
			// Not a path this rule can be checked against: a rule that could cover it
			// holds (a deny denies, an ask asks).
			return true
		}
		pats, ok := r.AbsPatterns(rs.anchors)
		if !ok {
			pats = []string{"/**/" + r.Pattern}
		}
		for _, abs := range pats {
			// A match of the whole path is one of it or of an ancestor (MatchPath): as
			// gitignore reads it, a pattern that matches a directory covers what it holds.
			hit, err := MatchPathSegsWithin(abs, nb.segs, nb.b)
			if err != nil {
				// Past the budget neither a match nor its absence is known: the rule
				// holds, as for a path it cannot be checked against.
				return true
			}
			if hit {
				return true
			}
		}
	}
	return false
}
