package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TestScreenLines: a line the SDK cannot decode is answered with a JSON-RPC error and not
// passed on; every other line is passed on whole, in order.
func TestScreenLines(t *testing.T) {
	initOld := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`
	initNew := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	batch := `[` + ping + `]`
	for _, tc := range []struct {
		name   string
		lines  []string
		passed []string
		codes  []int
		ids    []string
	}{
		{"not JSON", []string{"hello", ping}, []string{ping}, []int{codeParseError}, []string{"null"}},
		{"not a message", []string{`{"foo":1}`, `42`, ping}, []string{ping}, []int{codeInvalidRequest, codeInvalidRequest}, []string{"null", "null"}},
		{"a bad version keeps its id", []string{`{"jsonrpc":"1.0","id":7,"method":"ping"}`}, nil, []int{codeInvalidRequest}, []string{"7"}},
		{"an object id", []string{`{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`}, nil, []int{codeInvalidRequest}, []string{"null"}},
		{"an empty batch", []string{`[]`}, nil, []int{codeInvalidRequest}, []string{"null"}},
		{"blank lines", []string{"", "  ", ping}, []string{ping}, nil, nil},
		{"a batch before 2025-06-18", []string{initOld, batch}, []string{initOld, batch}, nil, nil},
		{"a batch from 2025-06-18", []string{initNew, batch, ping}, []string{initNew, ping}, []int{codeInvalidRequest}, []string{"null"}},
		{"too long", []string{`{"jsonrpc":"2.0","id":3,"method":"ping","pad":"` + strings.Repeat("x", maxLineBytes) + `"}`, ping}, []string{ping}, []int{codeInvalidRequest}, []string{"null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, logs bytes.Buffer
			r := screenLines(strings.NewReader(strings.Join(tc.lines, "\n")), &lockedWriter{w: &out}, &logs)
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			for _, l := range tc.passed {
				want += l + "\n"
			}
			if string(got) != want {
				t.Errorf("passed on %q, want %q", clip(got), clip([]byte(want)))
			}
			replies := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if out.Len() == 0 {
				replies = nil
			}
			if len(replies) != len(tc.codes) {
				t.Fatalf("replies %q, want %d", replies, len(tc.codes))
			}
			for i, line := range replies {
				var rep struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct{ Code int }
				}
				if err := json.Unmarshal([]byte(line), &rep); err != nil || rep.JSONRPC != "2.0" || rep.Error.Code != tc.codes[i] || string(rep.ID) != tc.ids[i] {
					t.Errorf("reply %d: %s (want code %d, id %s)", i, line, tc.codes[i], tc.ids[i])
				}
			}
		})
	}
}

func clip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// FuzzScreenLine: whatever a line holds, it is either answered with a well-formed JSON-RPC
// error or passed on as something the SDK decodes without ending the session.
func FuzzScreenLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, `{"id":{"a":1}}`, `[]`, `"x"`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsRune(line, '\n') || len(bytes.TrimSpace(line)) == 0 {
			return // screenLines splits lines and skips blank ones before screen
		}
		var sc screener
		reply, _ := sc.screen(line, false)
		if reply != nil {
			var rep struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct{ Code int }
			}
			if err := json.Unmarshal(reply, &rep); err != nil || rep.JSONRPC != "2.0" || rep.Error == nil || len(rep.ID) == 0 {
				t.Fatalf("reply %q to %q", reply, line)
			}
			return
		}
		trimmed := bytes.TrimSpace(line)
		if trimmed[0] == '[' {
			var batch []json.RawMessage
			if json.Unmarshal(trimmed, &batch) != nil || len(batch) == 0 {
				t.Fatalf("passed on a batch the SDK refuses: %q", line)
			}
			for _, m := range batch {
				if _, err := jsonrpc.DecodeMessage(m); err != nil {
					t.Fatalf("passed on a batch with %q: %v", m, err)
				}
			}
			return
		}
		if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
			t.Fatalf("passed on %q: %v", line, err)
		}
	})
}
