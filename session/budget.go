package session

import "sync"

// Budget is a session's aggregate result budget: the characters of tool results handed back
// to the agent so far, so that many medium results cannot flood its context.
type Budget struct {
	mu      sync.Mutex
	limit   int64
	results []BudgetEntry
	// small is the characters of the results admitted with AdmitSmall, counted together: an
	// entry each kept the session's every call (an empty Bash output, an image) for its
	// lifetime, by the tool_use_id its client chose, and an empty one was never evicted.
	small int64
	total int64
}

// BudgetEntry is one result counted against the budget.
type BudgetEntry struct {
	ToolUseID string
	Chars     int64
}

// DefaultBudgetChars is the aggregate budget of a session when the config says nothing.
const DefaultBudgetChars = 400_000

// NewBudget returns a budget of limit characters.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultBudgetChars
	}
	return &Budget{limit: limit}
}

// Admit counts a result of chars characters. When the total would pass the limit it returns
// the earlier results, largest first, that the caller should replace with previews (their
// entries are taken off the budget; the caller adds the previews back with Admit).
func (b *Budget) Admit(toolUseID string, chars int64) (evict []BudgetEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	evict = b.makeRoom(chars)
	b.results = append(b.results, BudgetEntry{ToolUseID: toolUseID, Chars: chars})
	b.total += chars
	return evict
}

// AdmitSmall counts a result the caller would never replace with a preview (one no larger
// than the preview): it is not remembered by itself, so a session's entries stay as many as
// its limit holds of results worth replacing, however many calls it makes. What it returns
// is Admit's.
func (b *Budget) AdmitSmall(chars int64) (evict []BudgetEntry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	evict = b.makeRoom(chars)
	b.small += chars
	b.total += chars
	return evict
}

// makeRoom takes results off the budget, largest first, until chars more fit; the small
// results, each smaller than any entry worth replacing, go last and only as far as needed.
// b.mu is held.
func (b *Budget) makeRoom(chars int64) (evict []BudgetEntry) {
	for b.total+chars > b.limit && len(b.results) > 0 {
		largest := 0
		for i, e := range b.results {
			if e.Chars > b.results[largest].Chars {
				largest = i
			}
		}
		e := b.results[largest]
		b.results = append(b.results[:largest], b.results[largest+1:]...)
		b.total -= e.Chars
		evict = append(evict, e)
	}
	if over := b.total + chars - b.limit; over > 0 && b.small > 0 {
		take := min(over, b.small)
		b.small -= take
		b.total -= take
	}
	return evict
}

// Total is the characters currently counted.
func (b *Budget) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Entries is how many results the budget remembers one by one.
func (b *Budget) Entries() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.results)
}

// Limit is the budget's size.
func (b *Budget) Limit() int64 { return b.limit }

// Clone returns an independent copy (a sub-agent's starting budget).
func (b *Budget) Clone() *Budget {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &Budget{limit: b.limit, total: b.total, small: b.small, results: append([]BudgetEntry(nil), b.results...)}
}
