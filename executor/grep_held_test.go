package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// TestGrepHeldPerUser: one user's running searches hold at most two whole outputs of rg in
// the daemon's memory; another search of theirs meanwhile reads 1 MiB and says why it was cut,
// and gets all of it once they end. Another user's searches are not held back.
func TestGrepHeldPerUser(t *testing.T) {
	var g heldBytes
	a, b, c := g.take(1, grepHeldBounds), g.take(1, grepHeldBounds), g.take(1, grepHeldBounds)
	if a != maxGrepOutput || b != maxGrepOutput || c != minGrepOutput {
		t.Errorf("rooms %d %d %d, want two whole and then %d", a, b, c, minGrepOutput)
	}
	if other := g.take(2, grepHeldBounds); other != maxGrepOutput {
		t.Errorf("another user's room %d, want %d", other, maxGrepOutput)
	}
	g.give(1, a)
	if d := g.take(1, grepHeldBounds); d != maxGrepOutput-minGrepOutput {
		t.Errorf("room once one ended: %d, want what the others leave, %d", d, maxGrepOutput-minGrepOutput)
	}

	e := newToolEnv(t)
	line := strings.Repeat("needle ", 20) + "\n"
	if err := os.WriteFile(filepath.Join(e.dir, "big.txt"), []byte(strings.Repeat(line, (3<<20)/len(line))), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(e.dir, "big.txt"), nobody, nobody)
	in := Input{"pattern": "needle", "output_mode": "content", "head_limit": 0}
	held := []int64{e.h.grepHeld.take(nobody, grepHeldBounds), e.h.grepHeld.take(nobody, grepHeldBounds)}
	res, err := e.call(t, "Grep", in)
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(res.ExtraMessages, "\n"); !strings.Contains(notes, "your other searches running now hold") {
		t.Errorf("a search while two whole ones run is not cut, or does not say why: %q", notes)
	}
	cut := res.Data["numLines"].(int)
	for _, n := range held {
		e.h.grepHeld.give(nobody, n)
	}
	res, err = e.call(t, "Grep", in)
	if err != nil {
		t.Fatal(err)
	}
	if whole := res.Data["numLines"].(int); whole <= cut || len(res.ExtraMessages) > 0 {
		t.Errorf("alone, the search read %d lines (%d while held), or was cut", whole, cut)
	}
	if len(e.h.grepHeld.by) != 0 {
		t.Errorf("room still held after the searches: %v", e.h.grepHeld.by)
	}
	// A subordinate uid's search takes its range owner's room: the user's other uids hold it.
	const owner = 4242
	e.s = session.NewStore().Create(session.Caller{UID: nobody, GID: nobody, User: "nobody", Home: e.dir, RangeOwner: owner},
		session.Params{Cwd: e.dir, Mode: permission.ModeDefault})
	held = []int64{e.h.grepHeld.take(owner, grepHeldBounds), e.h.grepHeld.take(owner, grepHeldBounds)}
	res, err = e.call(t, "Grep", in)
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(res.ExtraMessages, "\n"); !strings.Contains(notes, "your other searches running now hold") {
		t.Errorf("a subordinate uid's search while its owner's room is held is not cut: %q", notes)
	}
	for _, n := range held {
		e.h.grepHeld.give(owner, n)
	}
}
