package pctenc

import "strings"

// DecodeLenient decodes every valid %XX escape of s and keeps a malformed one as it is, as
// lenient servers do (url.PathUnescape refuses the whole string for one bad escape). With
// plusIsSpace, `+` is a space too, as in a query (PHP's and most frameworks' reading).
func DecodeLenient(s string, plusIsSpace bool) string {
	if !strings.Contains(s, "%") && (!plusIsSpace || !strings.Contains(s, "+")) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+' && plusIsSpace:
			b.WriteByte(' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
