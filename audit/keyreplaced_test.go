package audit

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A start that finds no signing key beside a signed log makes a new one and says so: an
// audit.key_replaced record, signed at once by the new key, naming both keys and the old head.
// Verifying with the new key alone then fails with ErrKeyReplaced, not as tampering, and counts
// the checkpoints it could not check; with the old public key too it passes. Before, the new
// key signed on in silence and verification failed on the first old checkpoint as a forgery.
func TestKeyReplacedIsRecorded(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, keyDir := filepath.Join(base, "audit"), filepath.Join(base, "audit-key")
	old := openTest(t, Config{Dir: dir, KeyDir: keyDir, CheckpointEvery: 4})
	appendN(t, old, 10)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	oldPub := old.PublicKey()
	if err := os.RemoveAll(keyDir); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, Config{Dir: dir, KeyDir: keyDir})
	appendN(t, l, 3)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	newPub := l.PublicKey()
	if newPub.Equal(oldPub) {
		t.Fatal("the key was not replaced")
	}

	var rec *Record
	var after []Kind
	for r, err := range Query(dir, Filter{}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec != nil && len(after) == 0 {
			after = append(after, r.Kind)
		}
		if r.Kind == KindKeyReplaced {
			rec = r
		}
	}
	if rec == nil {
		t.Fatal("no audit.key_replaced record")
	}
	d := rec.Detail
	if d["old_key"] != KeyID(oldPub) || d["key"] != KeyID(newPub) || d["old_head_seq"] != strconv.FormatUint(rec.Seq-1, 10) || d["old_head_hash"] != rec.Prev {
		t.Errorf("audit.key_replaced at seq %d: %v; want old key %s, new key %s, the old head at the record before", rec.Seq, d, KeyID(oldPub), KeyID(newPub))
	}
	if len(after) != 1 || after[0] != KindCheckpoint {
		t.Errorf("after audit.key_replaced: %v, want the new key's checkpoint", after)
	}

	rep, err := VerifyDir(dir, newPub)
	if !errors.Is(err, ErrKeyReplaced) || errors.Is(err, ErrTampered) {
		t.Fatalf("verify with the new key: %v, want ErrKeyReplaced and no tampering", err)
	}
	if rep.KeyReplacements != 1 || rep.UncheckedCheckpoints == 0 || rep.Reason != "" ||
		!strings.Contains(err.Error(), "replaced at seq "+strconv.FormatUint(rec.Seq, 10)) || !strings.Contains(err.Error(), KeyID(oldPub)) {
		t.Fatalf("verify with the new key: %v; report %+v", err, rep)
	}
	both := VerifyOptions{PublicKey: newPub, PreviousKeys: []ed25519.PublicKey{oldPub}}
	if rep, err := VerifyDirOptions(dir, both); err != nil || rep.KeyReplacements != 1 || rep.UncheckedCheckpoints != 0 {
		t.Fatalf("verify with both keys: %v; report %+v", err, rep)
	}

	// The old key does not stand for the new one: given as the public key, the new key's head
	// and checkpoints are not its.
	if _, err := VerifyDirOptions(dir, VerifyOptions{PublicKey: oldPub}); !errors.Is(err, ErrTampered) {
		t.Fatalf("verify with the old key alone: %v, want ErrTampered", err)
	}
	// A record rewritten before the replacement is still tampering, with or without the old key.
	files, _ := ListFiles(dir)
	rewriteRecord(t, files[0], 2)
	for _, opt := range []VerifyOptions{{PublicKey: newPub}, both} {
		if _, err := VerifyDirOptions(dir, opt); !errors.Is(err, ErrTampered) {
			t.Fatalf("a record rewritten before the replacement: %v, want ErrTampered", err)
		}
	}
}

// A forger with the files but not the key cannot pass records off as a key replacement's: a
// checkpoint of their key after the signed head fails as tampering, and so does one that an
// audit.key_replaced of theirs follows, since no signature of the key given covers it.
func TestForgedKeyReplacementIsTampering(t *testing.T) {
	t.Parallel()
	_, forger, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	fpub := forger.Public().(ed25519.PublicKey)
	for _, withReplacement := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "audit")
		l := openTest(t, Config{Dir: dir, CheckpointEvery: 4})
		appendN(t, l, 6)
		l.Close()
		path := lastLogFile(t, dir)
		b, _ := os.ReadFile(path)
		ls := lines(b)
		last, err := parseLine(ls[len(ls)-1][:len(ls[len(ls)-1])-1])
		if err != nil {
			t.Fatal(err)
		}
		add := func(r *Record) {
			r.V, r.Seq, r.Time, r.Prev = Version, last.Seq+1, last.Time, last.Hash
			line, hash, err := encode(r)
			if err != nil {
				t.Fatal(err)
			}
			r.Hash = hash
			b = append(b, line...)
			last = r
		}
		add(&Record{Kind: KindCallStart, Tool: "Bash", Input: []byte(`{"command":"forged"}`)})
		add(&Record{Kind: KindCheckpoint, Detail: map[string]string{"signed_seq": strconv.FormatUint(last.Seq, 10),
			"signed_hash": last.Hash, "key": KeyID(fpub), "sig": sign(forger, last.Seq, last.Hash)}})
		if withReplacement {
			add(&Record{Kind: KindKeyReplaced, Detail: map[string]string{"key": KeyID(l.PublicKey())}})
		}
		os.WriteFile(path, b, 0o600)
		rep, err := VerifyDir(dir, l.PublicKey())
		if !errors.Is(err, ErrTampered) || rep.Reason == "" {
			t.Fatalf("replacement %v: %v, want ErrTampered", withReplacement, err)
		}
	}
}
