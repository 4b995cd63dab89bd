package worker

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// replace_all cannot grow a file past what Edit writes (issue 17).
func TestReplaceAllBounded(t *testing.T) {
	content := strings.Repeat("a", 100_000)
	_, err := ApplyEdits("f", content, []Edit{{OldString: "a", NewString: strings.Repeat("b", 1000), ReplaceAll: true}})
	if errcode.Of(err) != errcode.TooLarge || !strings.Contains(err.Error(), "replacing 100000 occurrences") {
		t.Fatalf("err = %v, want too_large", err)
	}
	res, err := ApplyEdits("f", content, []Edit{{OldString: "a", NewString: "bb", ReplaceAll: true}})
	if err != nil || len(res.Content) != 200_000 {
		t.Fatalf("a small replace_all: %v", err)
	}
}

// TestApplyEditsBoundedByGrowth: the bounds hold for the content as the edits grow it, not as
// it started: a 1 MiB file that a first replace_all grows sixtyfold, then edited again and
// again, is refused at once (a preview of it took the daemon 3 GB and minutes of CPU), and so
// are edits that would read more than maxWork in all.
func TestApplyEditsBoundedByGrowth(t *testing.T) {
	content := strings.Repeat("a", 1<<20)
	grow := []Edit{{OldString: "a", NewString: strings.Repeat("b", 60), ReplaceAll: true}}
	for range 9 {
		grow = append(grow, Edit{OldString: "b", NewString: "c", ReplaceAll: true}, Edit{OldString: "c", NewString: "b", ReplaceAll: true})
	}
	if _, err := ApplyEditsBounded("f", content, grow, 4<<20, 64<<20); errcode.Of(err) != errcode.TooLarge {
		t.Errorf("growing past maxBytes: %v, want too_large", err)
	}
	many := make([]Edit, 0, 40)
	for range 20 {
		many = append(many, Edit{OldString: "a", NewString: "b", ReplaceAll: true}, Edit{OldString: "b", NewString: "a", ReplaceAll: true})
	}
	if _, err := ApplyEditsBounded("f", content, many, 4<<20, 16<<20); errcode.Of(err) != errcode.TooLarge || !strings.Contains(err.Error(), "edit 16:") {
		t.Errorf("reading past maxWork: %v, want too_large at edit 16", err)
	}
	if res, err := ApplyEditsBounded("f", content, many[:10], 4<<20, 16<<20); err != nil || res.Content != content {
		t.Errorf("within both bounds: %v", err)
	}
}
