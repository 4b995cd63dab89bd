package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/protocol"
)

// Stats is `sbctl audit stats`: what the calls in a window added up to.
type Stats struct {
	Calls int `json:"calls"`
	// ByUserToolBehavior counts calls by "user tool behavior".
	ByUserToolBehavior []Count `json:"by_user_tool_behavior"`
	// TopDenied are the most denied commands (or paths), TopAskingRules the rules that asked
	// most: the candidates for an allow rule.
	TopDenied      []Count `json:"top_denied"`
	TopAskingRules []Count `json:"top_asking_rules"`
}

// Count is one row of Stats.
type Count struct {
	Key   string `json:"key"`
	Count int    `json:"count"`
}

// auditStats counts each call once, by its last record (call.end, or call.decide for a
// decision alone). An ask's "rule" is the one its approval suggested (what would allow it
// next time) when it made an approval, else the rule or step that asked.
func auditStats(e *Env, args []string) error {
	fs := NewFlags(e, "audit stats")
	var af auditFilters
	af.register(fs)
	top := fs.Int("top", 10, "rows in each top list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if af.kind != "" {
		return UsageError("audit stats counts calls; --kind does not apply")
	}
	q := af.query()
	q.Set("kind", "call.end,call.decide,approval.request")
	suggested := map[string]string{} // approval id → first suggested rule
	byUTB, denied, asking := map[string]int{}, map[string]int{}, map[string]int{}
	var st Stats
	err := e.Client().Records(e.Ctx, q, func(_ []byte, r *protocol.Record) error {
		if r.Kind == "approval.request" {
			var rules []string
			if json.Unmarshal([]byte(r.Detail["suggested_rules"]), &rules) == nil && len(rules) > 0 {
				suggested[r.Detail["approval_id"]] = rules[0]
			}
			return nil
		}
		if r.Decision == nil {
			return nil
		}
		st.Calls++
		user := "-"
		if r.Caller != nil {
			user = r.Caller.User
			if user == "" {
				user = fmt.Sprint(r.Caller.UID)
			}
		}
		byUTB[Visible(user)+"\t"+Visible(orDash(r.Tool))+"\t"+Visible(r.Decision.Behavior)]++
		switch r.Decision.Behavior {
		case "deny":
			denied[r.Tool+": "+Clip(InputSummary(r.Tool, r.Input), 100)]++
		case "ask":
			key := suggested[r.Detail["approval_id"]]
			if key == "" {
				key = r.Decision.Rule
			}
			if key == "" && r.Decision.Step == "mode" {
				key = "(no rule: " + r.Mode + " mode asks)"
			} else if key == "" {
				key = "(no rule: the " + r.Decision.Step + " step asks)"
			}
			asking[key]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	st.ByUserToolBehavior = counts(byUTB, 0)
	st.TopDenied, st.TopAskingRules = counts(denied, *top), counts(asking, *top)
	if e.JSON {
		for i := range st.ByUserToolBehavior {
			st.ByUserToolBehavior[i].Key = strings.ReplaceAll(st.ByUserToolBehavior[i].Key, "\t", " ")
		}
		return PrintJSON(e.Stdout, st)
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d calls\n\nUSER\tTOOL\tBEHAVIOR\tCALLS\n", st.Calls)
	for _, c := range st.ByUserToolBehavior {
		fmt.Fprintf(tw, "%s\t%d\n", c.Key, c.Count)
	}
	for _, list := range []struct {
		title string
		rows  []Count
	}{{"TOP DENIED", st.TopDenied}, {"TOP ASKING RULES (candidates for an allow)", st.TopAskingRules}} {
		fmt.Fprintf(tw, "\n%s\tCALLS\n", list.title)
		for _, c := range list.rows {
			fmt.Fprintf(tw, "%s\t%d\n", Visible(c.Key), c.Count)
		}
	}
	return tw.Flush()
}

// counts sorts m by count, then key; n > 0 keeps the first n.
func counts(m map[string]int, n int) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{k, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Key < out[j].Key
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}
