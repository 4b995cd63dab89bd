package audit

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
)

// A tail holds where its records are, not the records: what it keeps while the log is read
// does not grow with the records' size, and reading the places gives the same records as a
// full query's last ones.
func TestTailRefsHoldPlacesNotRecords(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Config{Dir: dir}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	input, _ := json.Marshal(map[string]string{"command": strings.Repeat("x", 60<<10)})
	const n = 400
	for i := 0; i < n; i++ {
		kind := KindCallStart
		if i%2 == 1 {
			kind = KindSessionCreate
		}
		if err := l.Append(ctx, &Record{Kind: kind, Session: "s", Input: input}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f := Filter{Kinds: []Kind{KindCallStart}}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	refs, err := TailRefs(dir, f, n)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != n/2 {
		t.Fatalf("%d refs, want %d", len(refs), n/2)
	}
	// 200 records of 60 KiB are 12 MB; their places are a few KB.
	if held := int64(after.HeapAlloc) - int64(before.HeapAlloc); held > 1<<20 {
		t.Errorf("the tail of %d records holds %d KB while the log is read", len(refs), held>>10)
	}
	runtime.KeepAlive(refs)

	var want []uint64
	for r, err := range Query(dir, f) {
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r.Seq)
	}
	refs, err = TailRefs(dir, f, 7)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for r, err := range ReadRefs(refs, f) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != KindCallStart || len(r.Input) < 60<<10 {
			t.Fatalf("read back %s with %d bytes of input", r.Kind, len(r.Input))
		}
		got = append(got, r.Seq)
	}
	if len(got) != 7 {
		t.Fatalf("got %v", got)
	}
	for i := range got {
		if got[i] != want[len(want)-7+i] {
			t.Fatalf("tail %v, want the last 7 of %v", got, want[len(want)-7:])
		}
	}
	// A place that holds another record by the time it is read (another caller's, another
	// kind) is an error, never that record.
	moved := append([]Ref(nil), refs...)
	moved[0].Seq++
	for _, err := range ReadRefs(moved, f) {
		if err == nil {
			t.Fatal("a record other than the one found there was yielded")
		}
		break
	}
	other := f
	other.Kinds = []Kind{KindCallEnd}
	for _, err := range ReadRefs(refs, other) {
		if err == nil {
			t.Fatal("a record the filter does not match was yielded")
		}
		break
	}
}
