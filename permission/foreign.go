package permission

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"
)

// ForeignHit is the first deny rule, else the first ask rule, of rs that names a call of a
// tool sandboxd does not run (an agent's own: Task, WebSearch, NotebookEdit, an MCP
// server's), so that a hook deciding the agent's call holds it as the agent would: by name
// (a bare rule, a tool-name pattern such as mcp__srv or *, and the Edit, Write and Read rules
// that cover NotebookEdit), by parameter (Tool(param:value)), and for NotebookEdit by its
// notebook_path against the writing tools' and Read's path rules. Allow rules are never
// consulted: sandboxd cannot vouch for a tool it does not run.
func (rs *RuleSet) ForeignHit(tool string, input map[string]any) (Rule, bool) {
	if rs == nil {
		return Rule{}, false
	}
	for _, b := range []Behavior{Deny, Ask} {
		for _, r := range rs.rules {
			if r.Behavior == b && rs.foreignMatch(r, tool, input) {
				return r, true
			}
		}
	}
	return Rule{}, false
}

func (rs *RuleSet) foreignMatch(r Rule, tool string, input map[string]any) bool {
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
		p, _ := input["notebook_path"].(string)
		if !strings.HasPrefix(p, "/") {
			// Not a path this rule can be checked against: a rule that could cover it
			// holds (a deny denies, an ask asks).
			return true
		}
		pats, ok := r.AbsPatterns(rs.anchors)
		if !ok {
			pats = []string{"/**/" + r.Pattern}
		}
		// As gitignore reads it: a pattern that matches a directory covers what it holds.
		for p = path.Clean(p); ; p = path.Dir(p) {
			for _, abs := range pats {
				if MatchPath(abs, p) {
					return true
				}
			}
			if p == "/" {
				return false
			}
		}
	}
	return false
}
