package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/gowebpki/jcs"
)

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// The example of RFC 8785 section 3.2.2: a third party recomputes input_digest from the input
// with any JCS implementation.
func TestInputDigestIsJCS(t *testing.T) {
	t.Parallel()
	in := `{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	if got := InputDigest([]byte(in)); got != sha([]byte(want)) {
		t.Errorf("RFC 8785 example: digest %s, want sha256 of %s", got, want)
	}
	for _, in := range []string{
		`{"command":"ls -la","timeout":120000}`,              // the fast path
		`{"b":1,"a":2}`,                                      // key order
		`{"command":"echo \u00e9"}`,                          // an escape JCS writes raw
		`{"x":1.50}`, `{"x":1e3}`, `{"x":12345678901234567}`, // numbers as ECMAScript writes them
		`{"\u20ac":1,"\ud83d\ude00":2,"z":3}`, // keys ordered by UTF-16 code units
		`{"s":"tab\there\u2028"}`,
	} {
		canon, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := InputDigest([]byte(in)); got != sha(canon) {
			t.Errorf("%s: digest %s, want the JCS form's %s (%s)", in, got, sha(canon), canon)
		}
	}
	// Literals are not numbers: input with true or false is its own JCS form like any other,
	// and takes the fast path.
	for _, in := range []string{`{"a":true,"b":false,"c":null}`, `[false,-12,true,0]`, `{"read_only":true,"uid":0}`} {
		if !jcsAlready([]byte(in)) {
			t.Errorf("%s: not proved its own JCS form", in)
		}
	}
	for _, in := range []string{`[1e3]`, `[1.5]`, `[-0]`, `[1234567890123456]`, `[true,1E2]`} {
		if jcsAlready([]byte(in)) {
			t.Errorf("%s: proved its own JCS form, which it is not", in)
		}
	}
	if got := InputDigest([]byte("not json")); got != sha([]byte("not json")) {
		t.Errorf("invalid JSON is digested raw: %s", got)
	}
}

// The fast path never claims input is its own JCS form when it is not.
func FuzzInputDigest(f *testing.F) {
	for _, s := range []string{`{"command":"ls"}`, `{"a":[1,2,{"b":null}],"c":"\n"}`, `{"x":1e3}`, `{"é":1}`, `[0,-1,"\u0001"]`,
		`{"a":true,"b":false,"c":-0}`, `[1E2,-1.5,123456789012345,1234567890123456]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !jcsAlready(in) {
			return
		}
		canon, err := jcs.Transform(in)
		if err != nil {
			t.Fatalf("fast path took invalid JSON %q: %v", in, err)
		}
		if string(canon) != string(in) {
			t.Fatalf("fast path took %q, whose JCS form is %q", in, canon)
		}
	})
}

// A version 1 record (input_digest over Go's canonical JSON) still reads and verifies after the
// upgrade; a version from the future does not.
func TestVersionOneRecordsStillVerify(t *testing.T) {
	t.Parallel()
	for v, ok := range map[int]bool{1: true, Version: true, Version + 1: false} {
		r := callRecord(1)
		r.V, r.Seq = v, 1
		line, _, err := encodeReference(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseLine(line[:len(line)-1]); (err == nil) != ok {
			t.Errorf("version %d: parse error %v", v, err)
		}
	}
}
