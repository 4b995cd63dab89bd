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
