package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/gowebpki/jcs"
)

// InputDigest is a record's input_digest: "sha256:" and the hex SHA-256 of the input's RFC 8785
// (JCS) canonical form, so anyone holding the input can recompute it with any JCS library.
// Input that is not JSON is digested as its raw bytes.
func InputDigest(input []byte) string { return inputDigest(input, isCanonical(input)) }

// inputDigest is InputDigest with isCanonical(input) already known.
func inputDigest(input []byte, canonical bool) string {
	canon := input
	if !canonical || !jcsSafe(input) {
		if c, err := jcs.Transform(input); err == nil {
			canon = c
		}
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// jcsAlready reports whether input is, byte for byte, its own JCS form, proved by one scan:
// what agents send nearly always is, and the transform costs more than the hash.
func jcsAlready(b []byte) bool { return isCanonical(b) && jcsSafe(b) }

// jcsSafe reports whether input that isCanonical (keys sorted, no whitespace, encoding/json
// escapes) is its JCS form too: it is ASCII (so byte order is JCS's UTF-16 key order), has no
// \u escape (JCS writes those characters raw or as \b \f) and no number but a short integer
// other than -0 (JCS writes numbers as ECMAScript does).
func jcsSafe(b []byte) bool {
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 0x80 {
			return false
		}
		if inStr {
			switch c {
			case '\\':
				if i+1 < len(b) && b[i+1] == 'u' {
					return false
				}
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
		case c == '-' || c >= '0' && c <= '9':
			// A number, to its end: the e of true and false is not an exponent.
			j := i
			for j < len(b) && strings.IndexByte("0123456789+-.eE", b[j]) >= 0 {
				j++
			}
			num := b[i:j]
			if bytes.ContainsAny(num, ".eE") || string(num) == "-0" || len(bytes.TrimPrefix(num, []byte("-"))) > 15 {
				return false // JCS writes these as ECMAScript does, -0 as 0
			}
			i = j - 1
		}
	}
	return true
}
