package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/protocol"
)

// encoded is what a json.Encoder without HTML escaping writes for v, without its newline.
func encoded(t testing.TB, v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func checkWriteResult(t testing.TB, r protocol.CallResult) {
	var got bytes.Buffer
	if err := writeResult(&got, &r); err != nil {
		t.Fatal(err)
	}
	if want := encoded(t, &r); got.String() != want {
		i := 0
		for i < min(got.Len(), len(want)) && got.String()[i] == want[i] {
			i++
		}
		t.Fatalf("writeResult differs from encoding/json at byte %d of %d/%d: got %.80q, want %.80q", i, got.Len(), len(want), got.String()[i:], want[i:])
	}
}

// TestWriteResultIsEncodingJSON: the sliced writer gives the clients exactly the bytes
// encoding/json gives, whatever the data holds.
func TestWriteResultIsEncodingJSON(t *testing.T) {
	img := make([]byte, 300<<10)
	for i := range img {
		img[i] = byte(rand.IntN(256))
	}
	b64 := base64.StdEncoding.EncodeToString(img)
	// Text that needs escaping on both sides of every slice boundary, multibyte runes across
	// them, invalid UTF-8, U+2028 and HTML characters.
	var odd strings.Builder
	for odd.Len() < 3*dataSlice {
		odd.WriteString("héllo \"q\" \\ <a&b> \u2028 \x01 \xff\xfe 日本語 \xe2\x82 ")
	}
	for _, off := range []int{0, 1, 2, 3} {
		mixed := strings.Repeat("A", dataSlice-off) + "日本\"x" + b64
		for _, r := range []protocol.CallResult{
			{ToolUseID: "t1", Tool: "Read", Content: []protocol.Block{{Type: "image", MediaType: "image/png", Data: b64}},
				Data: map[string]any{"type": "image", "content": nil, "file": map[string]any{"filePath": "/w/a \"b\".png"}}},
			{ToolUseID: "t2", Tool: "Read", Decision: &protocol.Decision{Behavior: "allow", Reason: `"content":null`},
				Content: []protocol.Block{{Type: "text", Text: "before"}, {Type: "image", MediaType: "image/jpeg", Data: odd.String()},
					{Type: "image", MediaType: "image/png", Data: mixed}, {Type: "text", Text: strings.Repeat("x", dataSlice+off)}},
				Data: map[string]any{}, Extra: []string{"e"}, Error: &protocol.ErrorDetail{Class: "c", Message: "m"}, ApprovalID: "a"},
			{ToolUseID: "t3", Tool: "Bash", Content: []protocol.Block{{Type: "text", Text: "small"}}, Data: map[string]any{"stdout": "x"}},
			{ToolUseID: "t4", Tool: "Bash"},
		} {
			checkWriteResult(t, r)
		}
	}
}

func FuzzWriteResult(f *testing.F) {
	f.Add("image", "image/png", "QUJD", 0)
	f.Add("text", "", "a\"\\\x00\u2028é", 3)
	f.Fuzz(func(t *testing.T, typ, media, data string, repeat int) {
		// Repeated to past dataSlice, so the sliced path runs on what the fuzzer finds.
		big := strings.Repeat(data, min(dataSlice*2/max(len(data), 1)+1, 1<<20)*(1+repeat%2))
		checkWriteResult(t, protocol.CallResult{ToolUseID: "t", Tool: "Read",
			Content: []protocol.Block{{Type: typ, MediaType: media, Data: big}, {Type: typ, Data: data}}, Data: map[string]any{}})
	})
}

// TestPlainJSON: the word-at-a-time test agrees with the byte-at-a-time one for every byte at
// every position of a word, and on the tail.
func TestPlainJSON(t *testing.T) {
	for c := range 256 {
		for pos := range 11 {
			b := []byte("ABCDEFGHIJK")
			b[pos] = byte(c)
			want := c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
			if got := plainJSON(string(b)); got != want {
				t.Fatalf("byte %#x at %d: plainJSON = %v, want %v", c, pos, got, want)
			}
		}
	}
}

func BenchmarkWriteResultImage(b *testing.B) {
	img := make([]byte, 3840<<10)
	for i := range img {
		img[i] = byte(i * 7)
	}
	r := protocol.CallResult{ToolUseID: "t", Tool: "Read", Content: []protocol.Block{{Type: "image", MediaType: "image/png", Data: base64.StdEncoding.EncodeToString(img)}}, Data: map[string]any{}}
	b.SetBytes(int64(len(r.Content[0].Data)))
	b.Run("encoding-json", func(b *testing.B) {
		enc := json.NewEncoder(io.Discard)
		enc.SetEscapeHTML(false)
		for b.Loop() {
			_ = enc.Encode(&r)
		}
	})
	b.Run("writeResult", func(b *testing.B) {
		for b.Loop() {
			_ = writeResult(io.Discard, &r)
		}
	})
}
