package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

const toolSearchSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["query"],
  "properties": {
    "query": {"type": "string", "description": "Keywords to search deferred tools by name and description, or \"select:Name1,Name2\" for exact names"},
    "max_results": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most tools to return (default 5)"}
  }
}`

func toolSearchDef(h *Host) Def {
	return Def{
		Name: "ToolSearch",
		Description: "Loads the full definitions of deferred tools (listed by name only). Query by keywords, or \"select:Name1,Name2\" for exact names; " +
			"the result carries each tool's input schema so it can be called.",
		Schema:          toolSearchSchema,
		ReadOnly:        always,
		ConcurrencySafe: always,
		Run: func(_ context.Context, c *Call, _ Progress) (*Result, error) {
			reg := h.tools().Registry
			if reg == nil {
				return nil, errcode.Msg(errcode.Unavailable, "tool search is not available on this daemon; call tools by the names listed")
			}
			matches := searchTools(reg(), c.Input.String("query"), int(c.Input.Int("max_results", 5)))
			type entry struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			}
			var out []entry
			var names []string
			for _, t := range matches {
				out = append(out, entry{t.Name(), t.Description(), t.Schema()})
				names = append(names, t.Name())
			}
			if len(out) == 0 {
				var deferred []string
				for _, t := range reg() {
					if t.ShouldDefer() && t.IsEnabled() {
						deferred = append(deferred, t.Name())
					}
				}
				sort.Strings(deferred)
				res := Text(fmt.Sprintf("No deferred tool matches %q. Deferred tools: %s", c.Input.String("query"), strings.Join(deferred, ", ")))
				res.Data = map[string]any{"matches": []string{}}
				return res, nil
			}
			b, _ := json.MarshalIndent(out, "", "  ")
			res := Text("<functions>\n" + string(b) + "\n</functions>")
			res.Data = map[string]any{"matches": names, "tools": out}
			return res, nil
		},
	}
}

// searchTools ranks the enabled deferred tools against query: "select:" names exactly,
// otherwise every keyword scores in the name (more) or the description.
func searchTools(tools []*Tool, query string, limit int) []*Tool {
	if limit <= 0 {
		limit = 5
	}
	var deferred []*Tool
	for _, t := range tools {
		if t.ShouldDefer() && t.IsEnabled() {
			deferred = append(deferred, t)
		}
	}
	if names, ok := strings.CutPrefix(strings.TrimSpace(query), "select:"); ok {
		var out []*Tool
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			for _, t := range deferred {
				if strings.EqualFold(t.Name(), n) {
					out = append(out, t)
				}
			}
		}
		return out
	}
	words := strings.Fields(strings.ToLower(query))
	type scored struct {
		t     *Tool
		score int
	}
	var ss []scored
	for _, t := range deferred {
		name, desc := strings.ToLower(t.Name()), strings.ToLower(t.Description())
		score := 0
		for _, w := range words {
			switch {
			case name == w:
				score += 10
			case strings.Contains(name, w):
				score += 5
			case strings.Contains(desc, w):
				score++
			}
		}
		if score > 0 {
			ss = append(ss, scored{t, score})
		}
	}
	sort.SliceStable(ss, func(i, j int) bool {
		if ss[i].score != ss[j].score {
			return ss[i].score > ss[j].score
		}
		return ss[i].t.Name() < ss[j].t.Name()
	})
	var out []*Tool
	for i := 0; i < len(ss) && i < limit; i++ {
		out = append(out, ss[i].t)
	}
	return out
}
