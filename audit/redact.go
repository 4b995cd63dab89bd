package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strings"
)

// secretPattern replaces the secret part of a match. keep is the number of leading submatch
// groups kept verbatim (the "NAME=" or "Authorization: Bearer " part) so a reader still sees
// what was there without seeing the value.
type secretPattern struct {
	name string
	re   *regexp.Regexp
	keep int
}

// Order matters: specific token shapes first so their label wins over the generic assignment.
var secretPatterns = []secretPattern{
	{"private_key", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`), 0},
	{"aws_access_key", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b`), 0},
	{"aws_secret_key", regexp.MustCompile(`(?i)(aws.{0,20}?secret.{0,20}?["']?\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}`), 1},
	{"github_token", regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b`), 0},
	{"github_token", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,255}\b`), 0},
	{"slack_token", regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{10,}`), 0},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), 0},
	{"authorization", regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?(?:bearer|basic|token|bot)\s+)[A-Za-z0-9._~+/=-]+`), 1},
	{"bearer", regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{8,}=*`), 1},
	{"url_password", regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+(@)`), 1},
	// NAME=value and NAME: value where NAME ends in a secret-ish word; covers env assignments,
	// .env files, YAML and JSON-in-a-string. Over-redaction is the safe error here.
	{"assignment", regexp.MustCompile(`(?i)(\b[a-z0-9_.-]*(?:_token|_secret|_key|_apikey|apikey|api-key|password|passwd|_pat|secret|token)["']?\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s"'&;|,}]+)`), 1},
}

// secretKey matches object keys whose string value is a secret whatever it looks like.
var secretKey = regexp.MustCompile(`(?i)^(?:password|passwd|secret|token|api[_-]?key|apikey|authorization|access[_-]?key|secret[_-]?access[_-]?key|private[_-]?key|client[_-]?secret|[a-z0-9_.-]*_(?:token|secret|key|password))$`)

// Redacted is the replacement prefix; the pattern name follows, e.g. "[REDACTED:github_token]".
const Redacted = "[REDACTED"

// RedactString replaces secrets in s by pattern.
func RedactString(s string) string {
	for _, p := range secretPatterns {
		if !p.re.MatchString(s) {
			continue
		}
		repl := Redacted + ":" + p.name + "]"
		s = p.re.ReplaceAllStringFunc(s, func(m string) string {
			if p.keep == 0 {
				return repl
			}
			sub := p.re.FindStringSubmatch(m)
			var b strings.Builder
			for i := 1; i <= p.keep && i < len(sub); i++ {
				b.WriteString(sub[i])
			}
			// Already redacted by a more specific pattern: keep its label.
			if strings.HasPrefix(strings.TrimLeft(m[b.Len():], `"'`), Redacted) {
				return m
			}
			b.WriteString(repl)
			if p.name == "url_password" && len(sub) > 2 {
				b.WriteString(sub[2])
			}
			return b.String()
		})
	}
	return s
}

// Redact returns input with secrets replaced (in every string value, and whole values under
// secret-looking keys) and the digest "sha256:<hex>" of the canonical unredacted input, so two
// records can be compared without revealing either.
//
// Canonical JSON: decoded with numbers kept as written, re-encoded by encoding/json (object
// keys sorted, no insignificant whitespace, no HTML escaping). Input that is not valid JSON is
// not stored at all: the result is the JSON string "[REDACTED:invalid_json]" and the digest is
// over the raw bytes.
func Redact(input json.RawMessage) (json.RawMessage, string) {
	if len(input) == 0 {
		return nil, ""
	}
	v, err := decodeNumbers(input)
	if err != nil {
		sum := sha256.Sum256(input)
		return json.RawMessage(`"` + Redacted + `:invalid_json]"`), "sha256:" + hex.EncodeToString(sum[:])
	}
	canon, err := canonicalJSON(v)
	if err != nil { // cannot happen for decoded JSON; refuse to store rather than leak
		return json.RawMessage(`"` + Redacted + `:invalid_json]"`), ""
	}
	sum := sha256.Sum256(canon)
	red, err := canonicalJSON(redactValue(v))
	if err != nil {
		return json.RawMessage(`"` + Redacted + `:invalid_json]"`), ""
	}
	return red, "sha256:" + hex.EncodeToString(sum[:])
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailingData
	}
	return v, nil
}

func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func redactValue(v any) any {
	switch t := v.(type) {
	case string:
		return RedactString(t)
	case []any:
		for i := range t {
			t[i] = redactValue(t[i])
		}
		return t
	case map[string]any:
		for k, e := range t {
			if s, ok := e.(string); ok && s != "" && secretKey.MatchString(k) {
				t[k] = Redacted + ":by_key]"
				continue
			}
			t[k] = redactValue(e)
		}
		return t
	}
	return v
}
