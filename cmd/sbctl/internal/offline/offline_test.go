package offline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/cmd/sbctl/internal/cli"
)

// sbctlFull runs sbctl-full's command line in-process.
func sbctlFull(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	heavy := func(e *cli.Env, name string, args []string) error { return Audit(e, args) }
	code = cli.Run(context.Background(), args, strings.NewReader(""), &out, &errb, heavy)
	return code, out.String(), errb.String()
}

// rehash rewrites the log as someone with the files but not the key can: an edit, then every
// hash, prev and checkpoint's signed hash after it recomputed, and the head's hash, so the
// chain holds again.
func rehash(t *testing.T, path, from, to string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	prev := ""
	for _, line := range bytes.SplitAfter(bytes.TrimSuffix(b, []byte("\n")), []byte("\n")) {
		var r audit.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		r.Input = json.RawMessage(strings.ReplaceAll(string(r.Input), from, to))
		r.Prev, r.Hash = prev, ""
		if r.Kind == audit.KindCheckpoint {
			r.Detail["signed_hash"] = prev
		}
		var enc bytes.Buffer
		je := json.NewEncoder(&enc)
		je.SetEscapeHTML(false)
		if err := je.Encode(&r); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(bytes.TrimSuffix(enc.Bytes(), []byte("\n")))
		prev = hex.EncodeToString(sum[:])
		out = append(out, bytes.Replace(enc.Bytes(), []byte(`"hash":""}`), []byte(`"hash":"`+prev+`"}`), 1)...)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	headPath := filepath.Join(filepath.Dir(path), "head.json")
	h, err := audit.ReadHead(headPath)
	if err != nil {
		t.Fatal(err)
	}
	h.Hash = prev // the head signs the last record
	b, _ = json.Marshal(h)
	if err := os.WriteFile(headPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Offline, the hash chain alone is no verdict: anyone who can edit the files can recompute it.
// Without a public key, verify refuses unless --chain-only asks for the chain alone, and then
// says that no signature was checked; it used to print "intact" and exit 0 on a rewritten log.
func TestAuditVerifyOfflineNeedsKey(t *testing.T) {
	base := t.TempDir()
	dir, keyDir := filepath.Join(base, "audit"), filepath.Join(base, "audit-key")
	l, err := audit.Open(audit.Config{Dir: dir, KeyDir: keyDir, CheckpointEvery: 2}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"make test", "git push"} {
		r := &audit.Record{Kind: audit.KindCallStart, Caller: &audit.Caller{UID: 1000}, Tool: "Bash", Input: []byte(`{"command":"` + cmd + `"}`)}
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(keyDir, "audit.pub")
	files, _ := audit.ListFiles(dir)
	if len(files) != 1 {
		t.Fatalf("want one log file, got %v", files)
	}

	cases := []struct {
		name string
		args []string
		code int
		out  string // in stdout or stderr
	}{
		{"dir without a key", []string{"--dir", dir}, 2, "--chain-only"},
		{"file without a key", []string{"--file", files[0]}, 2, "needs the log's public key"},
		{"chain only", []string{"--dir", dir, "--chain-only"}, 0, "chain intact: 3 records"},
		{"chain only says so", []string{"--dir", dir, "--chain-only"}, 0, "signatures NOT checked (--chain-only)"},
		{"with the key", []string{"--dir", dir, "--pubkey", pub}, 0, "intact: 3 records, seq 1..3, 1 files, 1 checkpoints, 0 recovered torn tails; checked chain, checkpoints and head signatures"},
		{"both", []string{"--dir", dir, "--chain-only", "--pubkey", pub}, 2, "not both"},
		{"old key without the key", []string{"--dir", dir, "--chain-only", "--old-pubkey", pub}, 2, "--old-pubkey needs --pubkey"},
	}
	for _, tc := range cases {
		code, out, errOut := sbctlFull(append([]string{"audit", "verify"}, tc.args...)...)
		if code != tc.code || !strings.Contains(out+errOut, tc.out) {
			t.Errorf("%s: exit %d, %q %q; want %d mentioning %q", tc.name, code, out, errOut, tc.code, tc.out)
		}
	}

	// What --chain-only leaves out: a rewritten, re-hashed log passes the chain and fails the
	// signatures.
	rehash(t, files[0], "git push", "true")
	if code, out, errOut := sbctlFull("audit", "verify", "--dir", dir, "--chain-only"); code != 0 || !strings.Contains(out, "signatures NOT checked") {
		t.Fatalf("re-hashed log, chain only: exit %d, %q %q", code, out, errOut)
	}
	if code, out, errOut := sbctlFull("audit", "verify", "--dir", dir, "--pubkey", pub); code != 1 || !strings.Contains(errOut, "NOT intact") {
		t.Fatalf("re-hashed log with the key: exit %d, %q %q", code, out, errOut)
	}
	if code, _, _ := sbctlFull("audit", "verify", "--dir", dir); code != 2 {
		t.Fatalf("re-hashed log without a key: exit %d, want the refusal", code)
	}
}
