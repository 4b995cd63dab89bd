package api

import (
	"bytes"
	"encoding/json"
	"io"
	"runtime"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/protocol"
)

// dataSlice is how much of a content block's data writeResult writes between yields of the
// daemon's P, and the size from which a block's data is written that way at all. An image's
// base64 is up to 5 MB: encoding/json scanned it in one stretch of ~4 ms, and on the daemon's
// one P every other user's requests waited behind each such stretch of a batch of images.
const dataSlice = 64 << 10

// writeResult writes r as a json.Encoder with SetEscapeHTML(false) would, without the trailing
// newline, the same bytes; but each block's data of dataSlice or more goes in slices, yielding
// the P between them, and the slices that need no escaping (all of base64) are written as they
// are instead of scanned rune by rune.
func writeResult(w io.Writer, r *protocol.CallResult) error {
	if !hasBigData(r.Content) {
		return encodeTo(w, r)
	}
	rest := *r
	rest.Content = nil
	var buf bytes.Buffer
	if err := encodeTo(&buf, &rest); err != nil {
		return err
	}
	// The first "content":null is the field's own: the fields before it are two strings, a
	// bool and a Decision, none of whose keys is "content", and a quote inside a string value
	// is escaped.
	b := buf.Bytes()
	const null = `"content":null`
	i := bytes.Index(b, []byte(null))
	if i < 0 {
		return encodeTo(w, r) // unreachable while CallResult's fields are as they are
	}
	if _, err := io.WriteString(w, string(b[:i])+`"content":[`); err != nil {
		return err
	}
	for j, blk := range r.Content {
		if j > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if err := writeBlock(w, blk); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]"+string(b[i+len(null):]))
	return err
}

func hasBigData(blocks []protocol.Block) bool {
	for _, b := range blocks {
		if len(b.Data) >= dataSlice {
			return true
		}
	}
	return false
}

// writeBlock writes one content block; Data is the struct's last field, so the block without
// it, its closing brace cut, is what comes before it.
func writeBlock(w io.Writer, blk protocol.Block) error {
	data := blk.Data
	if len(data) < dataSlice {
		return encodeTo(w, &blk)
	}
	blk.Data = ""
	var buf bytes.Buffer
	if err := encodeTo(&buf, &blk); err != nil {
		return err
	}
	head := buf.Bytes()
	if _, err := io.WriteString(w, string(head[:len(head)-1])+`,"data":"`); err != nil {
		return err
	}
	for len(data) > 0 {
		n := sliceEnd(data, dataSlice)
		if err := writeStringBody(w, data[:n]); err != nil {
			return err
		}
		data = data[n:]
		runtime.Gosched()
	}
	_, err := io.WriteString(w, `"}`)
	return err
}

// sliceEnd is where a slice of s at most n long ends so that it escapes exactly as its part
// of the whole would: before a byte that starts a rune within the last three (a valid UTF-8
// sequence never holds one, and is at most four long), else at n, where no valid sequence can
// be cut.
func sliceEnd(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	for i := n; i > n-utf8.UTFMax && i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return n
}

// writeStringBody writes s as the inside of a JSON string: as it is when nothing in it needs
// escaping, else through encoding/json without the quotes.
func writeStringBody(w io.Writer, s string) error {
	if plainJSON(s) {
		_, err := io.WriteString(w, s)
		return err
	}
	var buf bytes.Buffer
	if err := encodeTo(&buf, s); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes()[1 : buf.Len()-1])
	return err
}

// plainJSON reports whether s needs no escaping inside a JSON string: no control character,
// quote, backslash or byte of a multibyte rune. Eight bytes a test: a byte-at-a-time scan of an
// image's base64 cost as much as encoding it.
func plainJSON(s string) bool {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	// zero marks (in its high bit) each byte of v that is 0; only bytes above a marked one
	// can be marked falsely, so a word with none marked has none.
	zero := func(v uint64) uint64 { return (v - lo) &^ v }
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		// A high bit, a byte below 0x20 (valid once no high bit is set), '"' or '\\'.
		if (x|(x-lo*0x20)&^x|zero(x^(lo*'"'))|zero(x^(lo*'\\')))&hi != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// encodeTo writes v's JSON without HTML escaping and without the encoder's trailing newline.
func encodeTo(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes()[:buf.Len()-1])
	return err
}
