package audit

import (
	"bytes"
	"unicode/utf8"
)

// isCanonical reports whether b is byte for byte what canonicalJSON(decodeNumbers(b)) returns:
// no insignificant whitespace, object keys in strictly increasing order, strings escaped
// exactly as encoding/json escapes them (HTML escaping off), numbers as written. Tool inputs
// from agents are nearly always in this form already, and proving it is a single scan where
// the decode and re-encode cost most of an audit record's CPU. It may answer false for
// canonical input it does not try to prove (keys with escapes, deep nesting): the slow path
// then runs. It never answers true for anything else; FuzzCanonical checks that.
func isCanonical(b []byte) bool {
	s := canonScan{b: b}
	return s.value(0) && s.i == len(b)
}

// maxCanonDepth bounds the scanner's recursion; deeper input takes the slow path.
const maxCanonDepth = 64

type canonScan struct {
	b []byte
	i int
}

func (s *canonScan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *canonScan) value(depth int) bool {
	if depth > maxCanonDepth {
		return false
	}
	switch c := s.peek(); {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *canonScan) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

func (s *canonScan) object(depth int) bool {
	s.i++ // '{'
	if s.peek() == '}' {
		s.i++
		return true
	}
	var prev []byte
	for first := true; ; first = false {
		key, ok := s.str()
		// encoding/json sorts keys by their decoded text; a key with an escape would need
		// decoding to compare, so it is left to the slow path. Strictly increasing also
		// rules out duplicate keys, which decoding would collapse.
		if !ok || bytes.IndexByte(key, '\\') >= 0 || (!first && bytes.Compare(prev, key) >= 0) {
			return false
		}
		prev = key
		if s.peek() != ':' {
			return false
		}
		s.i++
		if !s.value(depth + 1) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *canonScan) array(depth int) bool {
	s.i++ // '['
	if s.peek() == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth + 1) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// str scans a string and returns its raw contents (between the quotes).
func (s *canonScan) str() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, true
		case c < 0x20: // encoding/json escapes every control character
			return nil, false
		case c == '\\':
			n := canonEscapeLen(s.b[s.i:])
			if n == 0 {
				return nil, false
			}
			s.i += n
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.b[s.i:])
			// Invalid UTF-8 is re-encoded as \ufffd, and U+2028/U+2029 are always escaped.
			if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
				return nil, false
			}
			s.i += size
		}
	}
	return nil, false
}

// canonEscapeLen returns the length of the escape at the start of b if it is one
// encoding/json writes, else 0.
func canonEscapeLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch b[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(b) < 6 {
			return 0
		}
		switch string(b[2:6]) {
		case "2028", "2029":
			return 6
		}
		if b[2] != '0' || b[3] != '0' || (b[4] != '0' && b[4] != '1') || !isLowerHex(b[5]) {
			return 0
		}
		switch (b[4]-'0')<<4 | hexVal(b[5]) {
		case '\b', '\f', '\n', '\r', '\t': // these have short forms
			return 0
		}
		return 6
	}
	return 0
}

func isLowerHex(c byte) bool { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') }

func hexVal(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// number scans a JSON number; decoding keeps it as written, so any valid one is canonical.
func (s *canonScan) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *canonScan) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
