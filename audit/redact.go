package audit

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
)

// secretPattern replaces the secret part of a match. keep is the number of leading submatch
// groups kept verbatim (the "NAME=" or "Authorization: Bearer " part) so a reader still sees
// what was there without seeing the value. hints are lowercase substrings one of which every
// match contains: most strings contain none, and skipping the regexp for them is what keeps
// redaction off the audit path's profile.
type secretPattern struct {
	name  string
	re    *regexp.Regexp
	keep  int
	hints []string
}

// Order matters: specific token shapes first so their label wins over the generic assignment.
var secretPatterns = []secretPattern{
	// A key's body only: base64 lines of a key's width (the last may be short before the END
	// line) and PEM's encryption headers. A header with anything else after it (code: a
	// command that puts one in a comment, python3 -c "# -----BEGIN … KEY-----\nimport os…")
	// keeps the rest of the text visible, as is any line a program could run.
	{"private_key", regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:` + pemSep + `(?:Proc-Type: [0-9],[A-Z]+|DEK-Info: [A-Z0-9-]+,[0-9A-Fa-f]+))*(?:` + pemSep + `[A-Za-z0-9+/=]{40,})*(?:(?:` + pemSep + `[A-Za-z0-9+/=]{1,39})?` + pemSep + `-----END [A-Z0-9 ]*PRIVATE KEY-----)?`), 0, []string{"private key-----"}},
	{"aws_access_key", regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b`), 0,
		[]string{"akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "abia", "acca"}},
	{"aws_secret_key", regexp.MustCompile(`(?i)(aws[^\n]{0,20}?secret[^\n]{0,20}?["']?[ \t]*[=:][ \t]*["']?)[A-Za-z0-9/+=]{40}`), 1, []string{"aws"}},
	{"github_token", regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b`), 0, []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{"github_token", regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{22,255}\b`), 0, []string{"github_pat_"}},
	{"slack_token", regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]{10,}`), 0, []string{"xox"}},
	// Anthropic's and OpenAI's keys (sk-ant-api03-…, sk-proj-…), Stripe's, npm's tokens.
	{"api_key", regexp.MustCompile(`\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}`), 0, []string{"sk-"}},
	{"stripe_key", regexp.MustCompile(`\b[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}`), 0, []string{"k_live_", "k_test_"}},
	{"npm_token", regexp.MustCompile(`\bnpm_[A-Za-z0-9]{36}\b`), 0, []string{"npm_"}},
	{"jwt", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), 0, []string{"eyj"}},
	{"authorization", regexp.MustCompile(`(?i)(authorization["']?[ \t]*[:=][ \t]*["']?(?:(?:bearer|basic|token|bot)[ \t]+)?)[A-Za-z0-9._~+/=-]{8,}`), 1, []string{"authorization"}},
	{"bearer", regexp.MustCompile(`(?i)(\bbearer[ \t]+)[A-Za-z0-9._~+/-]{8,}=*`), 1, []string{"bearer"}},
	// Passwords given to a command line: sshpass -p, --password VALUE, mysql -pVALUE, docker
	// login -p VALUE, curl -u user:VALUE.
	{"cli_password", regexp.MustCompile(`((?:\bsshpass[ \t]+-p[ \t]*|--password(?:=|[ \t]+)|\bmysql(?:dump|admin)?\b[^|;&\n]*?[ \t]-p|\bdocker[ \t]+login\b[^|;&\n]*?[ \t]-p[ \t]+)["']?)[^\s"'|;&]+`), 1,
		[]string{"sshpass", "--password", "mysql", "docker"}},
	{"basic_auth", regexp.MustCompile(`((?:[ \t]-u|[ \t]--user)(?:=|[ \t]+)["']?[^\s:"'@/]+:)[^\s"'@|;&]+`), 1, []string{"-u ", "-u=", "--user"}},
	{"url_password", regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@\[]+:)[^\s@/;|&<>()]+(@)`), 1, []string{"://"}},
	// NAME=value and NAME: value where NAME ends in a secret-ish word; covers env assignments,
	// .env files, YAML and JSON-in-a-string. Over-redaction is the safe error here.
	// A JSON string that is one such assignment (a command's words as the policy's facts
	// hold them, unquoted: "DB_PASSWORD=a b"): its value runs to the string's end.
	{"assignment", regexp.MustCompile(`(?i)("[a-z0-9_]*(?:_token|_secret|_key|_apikey|apikey|password|passwd|_pat|secret|token)=)((?:[^"\\\n]|\\.)+)`), 1,
		[]string{"key", "password", "passwd", "_pat", "secret", "token"}},
	{"assignment", regexp.MustCompile(`(?i)(\b[a-z0-9_.-]*(?:_token|_secret|_key|_apikey|apikey|api-key|password|passwd|_pat|secret|token)["']?[ \t]*[=:][ \t]*)("[^"\n]*"|'[^'\n]*'|[^\s"'&;|,}]+)`), 1,
		[]string{"key", "password", "passwd", "_pat", "secret", "token"}},
}

// pemSep separates a PEM block's lines: a line break, or its escape in a quoted string.
const pemSep = `(?:\s|\\[nr])+`

// runsCode reports a span that a shell, read in some context, may run, expand or redirect
// rather than take as text: redacting it would hide from the record what the command did
// (x_token="$(touch f)", https://u:$(id)@host, x_token=>f). A quote of the other kind, or a
// shell operator, inside a quoted value means the quotes may not be the shell's: in
// echo "x_token='"; touch f; echo "'" the single quotes are text and the span is commands.
// So does a backslash, which may be what made the next quote text (x_token=a\' ; …).
// Such a value stays as written: the record must show what ran, a secret in it included.
func runsCode(span string) bool {
	if len(span) >= 2 && (span[0] == '"' || span[0] == '\'') && span[len(span)-1] == span[0] {
		span = span[1 : len(span)-1]
	}
	return strings.Contains(span, "$(") || strings.Contains(span, "${") || strings.ContainsAny(span, "`\n\"';&|<>()\\")
}

// namedElsewhere reports whether the name that s[start:end] assigns (`API_TOKEN=`) appears in
// s outside that span: the line uses the value, and a use may run it ($API_TOKEN as a
// command, eval "$API_TOKEN", sh -c "$API_TOKEN", ${!ref} through a name holding it), which
// no reading of the text can rule out. Such a value stays as written, as runsCode's do: the
// record must show what ran. names counts the names of s (nameCounts): the assignment itself
// is one.
func namedElsewhere(s string, start, end int, names map[string]int) bool {
	name := s[start:end]
	i := strings.IndexFunc(name, func(r rune) bool { return !isNameChar(r) })
	if i <= 0 || name[i] != '=' {
		return false // no shell assignment (a YAML or JSON key, my.api-key=…)
	}
	return names[name[:i]] > 1
}

// nameCounts counts each run of name characters in s: one pass, where looking each assigned
// name up in the whole text made redaction of a text of many assignments quadratic.
func nameCounts(s string) map[string]int {
	counts := map[string]int{}
	for i := 0; i < len(s); {
		if !isNameChar(rune(s[i])) {
			i++
			continue
		}
		j := i
		for j < len(s) && isNameChar(rune(s[j])) {
			j++
		}
		counts[s[i:j]]++
		i = j
	}
	return counts
}

// commandShaped reports an assigned value shaped like a command line rather than a token: one
// with a blank in it (`echo x`) or shorter than eight characters (`id`, `reboot`).
func commandShaped(span string) bool {
	v := strings.Trim(span, `"'`)
	return strings.ContainsAny(v, " \t") || len(v) < 8
}

// commandFollows reports whether the text after a shell assignment (to its line's end) runs
// a command: `API_TOKEN='echo x' make`, `export API_TOKEN=id; ./deploy.sh`. Any program reads
// its environment and may run what it holds (a Makefile's $(API_TOKEN), a script's
// $API_TOKEN), so a command-shaped value before a command stays as written: the record must
// show what ran. A token-shaped one (NPM_TOKEN=… npm publish) and an assignment alone on its
// line (a .env file, `export X_TOKEN="two words"`) are redacted, as tokens of known shapes
// are everywhere.
func commandFollows(rest string) bool {
	if i := strings.IndexAny(rest, "\n"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.Index(rest, `\n`); i >= 0 { // a newline as JSON escapes it
		rest = rest[:i]
	}
	return strings.IndexFunc(rest, func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '/' || r == '$'
	}) >= 0
}

// pathShaped reports an assigned value that is a path (`/tmp/run.sh`, `./x`, `~/bin/y`): a
// program to run more than a secret.
func pathShaped(span string) bool {
	v := strings.Trim(span, `"'`)
	return strings.HasPrefix(v, "/") || strings.HasPrefix(v, "./") || strings.HasPrefix(v, "../") || strings.HasPrefix(v, "~/")
}

// runsData matches a line that runs code it reads as data: a pipe into a shell, eval,
// source, xargs, env -S, a shell's -c or an interpreter's code option. Such a line may read
// an exported value by a name its text never spells (os.environ["GH_"+"TOKEN"],
// env | sed … | sh) and run it, so its assignments stay as written: the record must show
// what ran, a secret in it included.
var runsData = regexp.MustCompile(`\|\s*\\?(?:env\s+)?\\?(?:ba|z|da|k|fi)?sh\b|\b(?:eval|source|xargs)\b|(?:^|[;&|(){\n]|\b(?:then|do|else)\b)\s*\\?\.\s|\benv\s+-S|\b(?:ba|z|da|k)?sh\s+-c|\b(?:python[0-9.]*|pypy[0-9.]*|perl|ruby|node|nodejs|deno|bun|php|lua|tclsh|osascript|R|Rscript)\s+-[a-zA-Z]*[cerE]\b|\b[gmn]?awk\b`)

// isNameChar reports a character of a shell variable's name.
func isNameChar(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

// secretKey matches object keys whose string value is a secret whatever it looks like.
var secretKey = regexp.MustCompile(`(?i)^(?:password|passwd|secret|token|api[_-]?key|apikey|authorization|access[_-]?key|secret[_-]?access[_-]?key|private[_-]?key|client[_-]?secret|[a-z0-9_.-]*[_-](?:token|secret|key|password|passwd))$`)

// Redacted is the replacement prefix; the pattern name follows, e.g. "[REDACTED:github_token]".
const Redacted = "[REDACTED"

// RedactString replaces secrets in s by pattern.
func RedactString(s string) string {
	return redact(s, nil)
}

// redact replaces secrets in s by pattern, each only where data(cur, pattern, start, end)
// allows it when data is not nil: cur is s as the patterns before have left it, which start
// and end index.
func redact(s string, data func(cur, pattern string, start, end int) bool) string {
	lower := strings.ToLower(s)
	for _, p := range secretPatterns {
		if !containsAny(lower, p.hints) {
			continue
		}
		idx := p.re.FindAllStringSubmatchIndex(s, -1)
		if idx == nil {
			continue
		}
		repl := Redacted + ":" + p.name + "]"
		var b strings.Builder
		last := 0
		// What the assignment checks read of the whole text, once a text, not once a match.
		var names map[string]int
		readsData := false
		if p.name == "assignment" {
			names, readsData = nameCounts(s), runsData.MatchString(s)
		}
		for _, m := range idx {
			keepEnd := m[0]
			if p.keep > 0 {
				keepEnd = m[2*p.keep+1]
			}
			// Already redacted by a more specific pattern: keep its label.
			if strings.HasPrefix(strings.TrimLeft(s[keepEnd:m[1]], `"'`), Redacted) {
				continue
			}
			if p.name != "private_key" && runsCode(s[keepEnd:m[1]]) {
				continue
			}
			if p.name == "assignment" && (namedElsewhere(s, m[2], m[3], names) || pathShaped(s[keepEnd:m[1]]) || readsData ||
				strings.Contains(s[m[2]:m[3]], "=") && commandShaped(s[keepEnd:m[1]]) && commandFollows(s[m[1]:])) {
				continue
			}
			end := m[1]
			if p.name == "url_password" && m[5] > m[4] { // keep the "@" that ends userinfo
				end = m[4]
			}
			if data != nil && !data(s, p.name, keepEnd, end) {
				continue
			}
			b.WriteString(s[last:keepEnd])
			b.WriteString(repl)
			last = end
		}
		if last == 0 {
			continue
		}
		b.WriteString(s[last:])
		s = b.String()
		lower = strings.ToLower(s)
	}
	return s
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// Redact returns input with secrets replaced (in every string value, and whole values under
// secret-looking keys) and its InputDigest (over the unredacted input), so two records can be
// compared without revealing either.
//
// The stored form is canonical JSON: decoded with numbers kept as written, re-encoded by
// encoding/json (object keys sorted, no insignificant whitespace, no HTML escaping). Input that
// is not valid JSON is not stored at all: the result is the JSON string
// "[REDACTED:invalid_json]" and the digest is over the raw bytes.
func Redact(input json.RawMessage) (json.RawMessage, string) {
	if len(input) == 0 {
		return nil, ""
	}
	canonical := isCanonical(input)
	digest := inputDigest(input, canonical)
	if canonical && !mayHoldSecret(input) {
		return append(json.RawMessage(nil), input...), digest
	}
	v, err := decodeNumbers(input)
	if err != nil {
		return json.RawMessage(`"` + Redacted + `:invalid_json]"`), digest
	}
	canon, err := canonicalJSON(v)
	if err != nil { // cannot happen for decoded JSON; refuse to store rather than leak
		return json.RawMessage(`"` + Redacted + `:invalid_json]"`), ""
	}
	red, changed := redactValue(v)
	if !changed { // the common case: no secret, so the canonical input is the stored one
		return canon, digest
	}
	out, err := canonicalJSON(red)
	if err != nil {
		return json.RawMessage(`"` + Redacted + `:invalid_json]"`), ""
	}
	return out, digest
}

// RedactMarshaled is Redact's redaction, without the digest, for JSON that encoding/json
// produced: such JSON escapes none of the characters a secret hint is made of (letters,
// digits, "_", "-", ":", "/", space), so, as in canonical JSON, every key and string appears
// with its hints verbatim. Without a hint anywhere, nothing would be redacted, and js comes
// back as it is, neither decoded nor re-encoded; otherwise it is Redact's canonical output.
func RedactMarshaled(js []byte) []byte {
	if !mayHoldSecret(js) {
		return js
	}
	red, _ := Redact(js)
	return red
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

// secretKeyHints are lowercase substrings one of which every secretKey match contains.
var secretKeyHints = []string{"pass", "secret", "token", "key", "authorization"}

// allSecretHints is every hint of the patterns and of secretKey.
var allSecretHints = func() [][]byte {
	var all [][]byte
	for _, h := range secretKeyHints {
		all = append(all, []byte(h))
	}
	for _, p := range secretPatterns {
		for _, h := range p.hints {
			all = append(all, []byte(h))
		}
	}
	return all
}()

// mayHoldSecret reports whether canonical JSON holds any secret hint. In canonical JSON no
// character a hint is made of is escaped, so every decoded key and string value appears
// verbatim in it: without a hint anywhere, no string holds one and redaction changes nothing.
func mayHoldSecret(canonical []byte) bool {
	lower := bytes.ToLower(canonical)
	for _, h := range allSecretHints {
		if bytes.Contains(lower, h) {
			return true
		}
	}
	return false
}

// redactValue redacts v in place and reports whether anything was replaced.
func redactValue(v any) (any, bool) {
	switch t := v.(type) {
	case string:
		r := RedactString(t)
		return r, r != t
	case []any:
		changed := false
		for i := range t {
			var c bool
			t[i], c = redactValue(t[i])
			changed = changed || c
		}
		return t, changed
	case map[string]any:
		changed := false
		for k, e := range t {
			if s, ok := e.(string); ok && s != "" && containsAny(strings.ToLower(k), secretKeyHints) && secretKey.MatchString(k) {
				t[k] = Redacted + ":by_key]"
				changed = true
				continue
			}
			if s, ok := e.(string); ok && k == "command" {
				// A Bash call's command line, as the tool, the hook and a task name it.
				r := RedactCommand(s)
				t[k], changed = r, changed || r != s
				continue
			}
			var c bool
			t[k], c = redactValue(e)
			changed = changed || c
		}
		return t, changed
	}
	return v, false
}
