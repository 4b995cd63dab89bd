package cli

import (
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestWatchSelectionFollowsItsApproval: in the watch view a key answers the approval the
// person was reading. One leaving above it keeps the selection on it; the selected one leaving
// (or a first one arriving) lands the selection on an approval nobody read, which answers
// nothing until it has been on screen for watchSettle or the person moves to it.
func TestWatchSelectionFollowsItsApproval(t *testing.T) {
	ap := func(id string) protocol.Approval { return protocol.Approval{ID: id} }
	t0 := time.Unix(1000, 0)
	settled := t0.Add(watchSettle)
	for _, tc := range []struct {
		name string
		run  func(w *watchList)
		at   time.Time
		want string // "" when no key may answer
	}{
		{"one above leaves", func(w *watchList) { w.move(1); w.remove("a", t0) }, t0, "b"},
		{"one below leaves", func(w *watchList) { w.remove("c", t0) }, t0, "a"},
		{"the selected leaves", func(w *watchList) { w.remove("a", t0) }, t0, ""},
		{"the selected leaves, later", func(w *watchList) { w.remove("a", t0) }, settled, "b"},
		{"the selected leaves, then the person moves", func(w *watchList) { w.remove("a", t0); w.move(1) }, t0, "c"},
		{"the last selected leaves", func(w *watchList) { w.move(2); w.remove("c", t0) }, t0, ""},
		{"the list is rebuilt", func(w *watchList) { w.reset(t0); w.add(ap("x"), t0) }, t0, ""},
		{"a first one arrives", func(w *watchList) { w.remove("a", t0); w.remove("b", t0); w.remove("c", t0); w.add(ap("m"), t0) }, t0.Add(time.Millisecond), ""},
		{"all leave", func(w *watchList) { w.remove("a", t0); w.remove("b", t0); w.remove("c", t0) }, settled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watchList{}
			for _, id := range []string{"a", "b", "c"} {
				w.add(ap(id), t0.Add(-time.Hour))
			}
			tc.run(w)
			a, ok := w.selected(tc.at)
			if got := map[bool]string{true: a.ID, false: ""}[ok]; got != tc.want {
				t.Fatalf("a key answers %q, want %q", got, tc.want)
			}
		})
	}
}
