package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// The reference encodings the record encoder (appendBody, appendLine) must match byte for
// byte: encoding/json over the record, as Record's doc defines the canonical line.

// recordBody is Record between time and prev, with the same tags in the same order.
type recordBody struct {
	Kind        Kind              `json:"kind"`
	Caller      *Caller           `json:"caller,omitempty"`
	Session     string            `json:"session,omitempty"`
	Mode        string            `json:"mode,omitempty"`
	Tool        string            `json:"tool,omitempty"`
	ToolUseID   string            `json:"tool_use_id,omitempty"`
	Input       json.RawMessage   `json:"input,omitempty"`
	InputDigest string            `json:"input_digest,omitempty"`
	Decision    *Decision         `json:"decision,omitempty"`
	Outcome     *Outcome          `json:"outcome,omitempty"`
	Detail      map[string]string `json:"detail,omitempty"`
}

// encodeBodyJSON is the reference for appendBody.
func encodeBodyJSON(r *Record) ([]byte, error) {
	b := recordBody{r.Kind, r.Caller, r.Session, r.Mode, r.Tool, r.ToolUseID, r.Input,
		r.InputDigest, r.Decision, r.Outcome, r.Detail}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&b); err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	out := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return out[1 : len(out)-1], nil
}

// encodeReference is the reference for encode: the whole record by encoding/json, hash last.
func encodeReference(r *Record) (line []byte, hash string, err error) {
	c := *r
	c.Hash = ""
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, "", fmt.Errorf("encode record: %w", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if !bytes.HasSuffix(b, []byte(hashSuffix)) {
		return nil, "", fmt.Errorf("the canonical encoding does not end in the hash field")
	}
	sum := sha256.Sum256(b)
	hash = hex.EncodeToString(sum[:])
	line = append(append(b[:len(b)-2:len(b)-2], hash...), '"', '}', '\n')
	return line, hash, nil
}
