package classifier

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestRunJSONL(t *testing.T) {
	t.Parallel()
	in := "\"ls -la\"\nnot json\n\n\"rm -rf /\"\n{\"a\":1}\n"
	var out bytes.Buffer
	if err := RunJSONL(strings.NewReader(in), &out, testOpts); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines:\n%s", len(lines), out.String())
	}
	var c Classification
	if err := json.Unmarshal([]byte(lines[0]), &c); err != nil || !c.ReadOnly {
		t.Errorf("line 1: %v %s", err, lines[0])
	}
	if !strings.Contains(lines[1], `"error":"invalid_json_string"`) || !strings.Contains(lines[1], `"line":2`) {
		t.Errorf("line 2: %s", lines[1])
	}
	if err := json.Unmarshal([]byte(lines[2]), &c); err != nil || c.ReadOnly {
		t.Errorf("line 3: %v %s", err, lines[2])
	}
	if !strings.Contains(lines[3], "invalid_json_string") {
		t.Errorf("line 4: %s", lines[3])
	}
}

func TestJSONShape(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Classify("ls", testOpts))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"read_only":true`, `"reason":"read_only"`, `"parse_error":null`, `"subcommands":[`, `"risks":[]`, `"prefix":["ls"]`, `"deny_prefix":["ls"]`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("json %s lacks %s", b, k)
		}
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	got := Classify("ls > out; $X", testOpts).Format()
	for _, want := range []string{"not read-only (write_redirect)", `1. - "ls > out": write_redirect`, "[writes >out]", "[no allow prefix]"} {
		if !strings.Contains(got, want) {
			t.Errorf("Format() lacks %q:\n%s", want, got)
		}
	}
}
