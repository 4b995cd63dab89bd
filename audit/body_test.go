package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Strings that exercise every escaping rule of encoding/json.
var oddStrings = []string{
	"", "plain", `q"uote`, `back\slash`, "ctl\x00\x01\x1f\x7f", "\b\f\n\r\t", "a&b<c>",
	"\u2028\u2029", "bad\xffutf8\xc3", "héllo wörld 🎉", "\xed\xa0\x80", "tab\tin",
}

func TestAppendBodyMatchesJSON(t *testing.T) {
	t.Parallel()
	inputs := []json.RawMessage{nil, []byte(`{"command":"ls -la","timeout":120000}`),
		[]byte(`{"a":[1,-2.5e+3,true,false,null,{}],"b":"x\u0001\n\"\\\u2028"}`), []byte(`"` + Redacted + `:invalid_json]"`)}
	n := 0
	for i, s := range oddStrings {
		for j, in := range inputs {
			r := &Record{Kind: KindCallEnd, Session: s, Mode: "default", Tool: "Bash", ToolUseID: s + "x", Input: in,
				InputDigest: "sha256:00"}
			if (i+j)%2 == 0 {
				r.Caller = &Caller{UID: 4294967295, GID: 7, PID: -1, User: s, RangeOwner: 1001}
				r.Decision = &Decision{Behavior: "allow", Reason: s, Step: "mode"}
				r.Outcome = &Outcome{ExitCode: -1, Signal: s, DurationMS: 12, OOM: true, PidsLimit: true,
					OutputBytes: 1 << 40, MovedAside: []string{s, s + "/.envrc"}, Error: errcode.Timeout}
				r.Detail = map[string]string{s: s, "z": "1", "a" + s: "", "m": s}
			} else {
				r.Caller = &Caller{}
				r.Decision = &Decision{}
				r.Outcome = &Outcome{CPUMS: 3, PeakMemoryBytes: 9, Timeout: true, PersistedPath: s, MovedAside: []string{s}}
				r.Detail = map[string]string{}
			}
			checkBody(t, r)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no cases")
	}
}

func checkBody(t testing.TB, r *Record) {
	t.Helper()
	want, err := encodeBodyJSON(r)
	if err != nil {
		return // not encodable at all: nothing to match
	}
	got, err := appendBody(nil, r, false)
	if err != nil {
		t.Fatalf("appendBody refused what encoding/json encodes (%q): %v", r.Input, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendBody differs from encoding/json:\n got %s\nwant %s", got, want)
	}
}

func FuzzAppendBody(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s, []byte(`{"command":"`+s+`"}`), int64(len(s)), true)
	}
	f.Fuzz(func(t *testing.T, s string, input []byte, n int64, flag bool) {
		r := &Record{Kind: Kind(s), Session: s, ToolUseID: s, Input: input}
		if flag {
			r.Caller = &Caller{UID: uint32(n), PID: int32(n), User: s, RangeOwner: uint32(n >> 32)}
			r.Decision = &Decision{Behavior: s, Rule: s}
			r.Outcome = &Outcome{ExitCode: int(n), DurationMS: n, CPUMS: -n, OOM: n%2 == 0, Signal: s, MovedAside: []string{s}}
			r.Detail = map[string]string{s: s, "k": s}
		}
		checkBody(t, r)
	})
}

// FuzzCanonical checks isCanonical never vouches for input that decoding and re-encoding
// would change: that is what lets Redact store such input as it came.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"]}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a" :1}`,
		`"\u00e9"`, `"\u001f"`, `"\u000a"`, `"\n"`, `"\/"`, `-0.0e-0`, `01`, `[1,]`, `"\u2028"`, "\"\u2028\"",
		`{"k\"":1}`, `{"":{"":[]}}`, "\"\xff\"", `"\u2030"`, `"\u0020"`, `"\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !isCanonical(b) {
			return
		}
		v, err := decodeNumbers(b)
		if err != nil {
			t.Fatalf("isCanonical accepted invalid JSON %q: %v", b, err)
		}
		c, err := canonicalJSON(v)
		if err != nil || !bytes.Equal(c, b) {
			t.Fatalf("isCanonical accepted %q, canonical form is %q", b, c)
		}
	})
}

func TestIsCanonical(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		`{"a":1,"b":[true,null,"x"]}`: true, `{"command":"echo \"hi\"\n"}`: true, `"\u001f"`: true, `"é"`: true,
		`{"b":1,"a":2}`: false, `{"a":1,"a":2}`: false, `{"a" :1}`: false, ` 1`: false, `1 `: false,
		`"\u00e9"`: false, `"\u000a"`: false, `"\/"`: false, `"\u001F"`: false, "\"\u2028\"": false,
		`01`: false, `[1,]`: false, `"\u2030"`: false, `"\u0020"`: false, `"\ud83d\ude00"`: false, `{"a":1}{}`: false, "\"\xff\"": false, `"a` + "\t" + `"`: false,
	} {
		if got := isCanonical([]byte(s)); got != want {
			t.Errorf("isCanonical(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestHintsNeverEscaped guards mayHoldSecret's premise: no character of a hint is one that
// canonical JSON escapes, so a hint inside a decoded string is a hint in the raw text too.
func TestHintsNeverEscaped(t *testing.T) {
	t.Parallel()
	for _, h := range allSecretHints {
		for _, c := range h {
			if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
				t.Errorf("hint %q has %q, which canonical JSON may escape", h, c)
			}
		}
	}
}

// redactSlow is Redact without the canonical fast path: decode, redact, re-encode; the digest
// is over the input's JCS form.
func redactSlow(input []byte) ([]byte, string) {
	v, err := decodeNumbers(input)
	if err != nil {
		return nil, ""
	}
	if _, err := canonicalJSON(v); err != nil {
		return nil, ""
	}
	jcsForm, err := jcs.Transform(input)
	if err != nil {
		return nil, ""
	}
	sum := sha256.Sum256(jcsForm)
	red, _ := redactValue(v)
	out, err := canonicalJSON(red)
	if err != nil {
		return nil, ""
	}
	return out, "sha256:" + hex.EncodeToString(sum[:])
}

// FuzzRedactFastPath: whatever the input, Redact stores and digests exactly what decoding,
// redacting and re-encoding would: the fast path for canonical input never lets a secret
// through that the slow path would have caught.
func FuzzRedactFastPath(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"command":"export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789"}`,
		`{"password":"hunter2"}`, `{"a":"AKIAABCDEFGHIJKLMNOP"}`, `{"k":"x\u2028y"}`, `{"b":1,"a":"token=1"}`,
		`{"cmd":"curl -H 'Authorization: Bearer abcdefghijk' https://u:p@h/"}`, `["eyJhbGciOi.eyJzdWIi.sig"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, wantDigest := redactSlow(b)
		if want == nil {
			return // not JSON: Redact stores a placeholder, nothing to compare
		}
		got, gotDigest := Redact(b)
		if !bytes.Equal(got, want) || gotDigest != wantDigest {
			t.Fatalf("Redact(%q) = %q %s, slow path %q %s", b, got, gotDigest, want, wantDigest)
		}
		// RedactMarshaled's premise: on what encoding/json writes, skipping the decode when no
		// hint shows changes nothing Redact would have redacted.
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		js, err := json.Marshal(v)
		if err != nil {
			return
		}
		full, _ := Redact(js)
		var a, c any
		if json.Unmarshal(RedactMarshaled(js), &a) != nil || json.Unmarshal(full, &c) != nil || !reflect.DeepEqual(a, c) {
			t.Fatalf("RedactMarshaled(%q) = %q, Redact %q", js, RedactMarshaled(js), full)
		}
	})
}
