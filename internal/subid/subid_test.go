package subid

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), "subuid")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tab := Open(path)
	if _, ok := tab.Owner(100000); ok {
		t.Fatal("a missing file holds a range")
	}
	write("# comment\n1001:100000:65536\nroot:300000:65536\n0:400000:10\nnosuchuser-x:500000:10\nbad line\n1002:165536:65536\n1003:200000:100000\n1004:4294967290:10\n")
	tab.checked = time.Time{}
	for _, c := range []struct {
		id    uint32
		owner uint32
		ok    bool
	}{
		{99999, 0, false}, {100000, 1001, true}, {165535, 1001, true}, {165536, 1002, true},
		{231071, 1002, true},
		// 1003's range starts inside 1002's: the overlap is 1002's, the rest 1003's.
		{231072, 1003, true}, {299999, 1003, true}, {300000, 0, false},
		{300001, 0, false}, {400005, 0, false}, // root's ranges are no one's
		{500005, 0, false},     // an owner that does not exist
		{4294967295, 0, false}, // a range past the last id
		{1001, 0, false},
	} {
		if owner, ok := tab.Owner(c.id); owner != c.owner || ok != c.ok {
			t.Errorf("Owner(%d) = %d, %v; want %d, %v", c.id, owner, ok, c.owner, c.ok)
		}
	}
	// A change is seen on the next look past recheck.
	write("1005:100000:10\n")
	tab.checked = time.Time{}
	if owner, _ := tab.Owner(100005); owner != 1005 {
		t.Errorf("after the change: %d", owner)
	}
	if tab.Holds(100010) {
		t.Error("a range past its end")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("1001:100000:65536\n1002:0:4294967295\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		spans := parse(b, func(o string) (uint32, bool) { return uint32(len(o)), true })
		for i, s := range spans {
			if s.start >= s.end || s.end > 1<<32 || i > 0 && s.start < spans[i-1].end {
				t.Fatalf("spans not disjoint and sorted: %+v", spans)
			}
		}
	})
}
