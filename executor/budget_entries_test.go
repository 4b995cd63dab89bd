package executor

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/session"
)

// TestBudgetRemembersOnlyReplaceableResults: a session's budget keeps an entry only for a
// result it may later replace with a preview. It kept one for every call, by the tool_use_id
// the client chose (256 bytes at most), and one of an empty output (Bash `true`, an image
// Read) was never evicted: a user's calls grew the daemon without bound for as long as the
// session was used.
func TestBudgetRemembersOnlyReplaceableResults(t *testing.T) {
	h := &Host{}
	s := &session.Session{ID: "s_budgetentries", Budget: session.NewBudget(session.DefaultBudgetChars)}
	id := strings.Repeat("i", 256)
	for i := 0; i < 5000; i++ {
		out := ""
		if i%2 == 1 {
			out = "x" // a result of one character: never worth a preview either
		}
		c := &Call{ToolUseID: id, Session: s, host: h}
		if _, err := h.Budget(c, &Result{Content: []Block{{Type: "text", Text: out}}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Budget.Entries(); n > session.DefaultBudgetChars/PreviewChars+1 {
		t.Fatalf("the budget remembers %d results of at most a character each", n)
	}
	if got := s.Budget.Total(); got != 2500 {
		t.Fatalf("budget total %d, want the 2500 characters returned", got)
	}
	// Still counted: small results fill the budget and push out a large one, largest first.
	big := &Call{ToolUseID: "big", Session: s, host: h}
	if _, err := h.Budget(big, &Result{Content: []Block{{Type: "text", Text: strings.Repeat("b", 3*PreviewChars)}}}); err != nil {
		t.Fatal(err)
	}
	for s.Budget.Total() <= session.DefaultBudgetChars-PreviewChars {
		c := &Call{ToolUseID: "m", Session: s, host: h}
		if _, err := h.Budget(c, &Result{Content: []Block{{Type: "text", Text: strings.Repeat("m", PreviewChars)}}}); err != nil {
			t.Fatal(err)
		}
	}
	ev := s.Budget.AdmitSmall(2 * PreviewChars)
	if len(ev) != 1 || ev[0].ToolUseID != "big" {
		t.Fatalf("evicted %v, want the large result", ev)
	}
	if s.Budget.Total() > session.DefaultBudgetChars {
		t.Fatalf("budget total %d over its limit", s.Budget.Total())
	}
}
