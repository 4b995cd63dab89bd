package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"mvdan.cc/sh/v3/syntax"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	cases := []struct {
		name, in, secret, label string
	}{
		{"aws access key", "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws_access_key"},
		{"aws secret key", "aws_secret_access_key = wJalrXUtnFEMIxK7MDENGxbPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMIxK7MDENGxbPxRfiCYEXAMPLEKEY", "aws_secret_key"},
		{"github classic", "git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"},
		{"github oauth", "gh api -H 'x: gho_abcdefghijklmnopqrstuvwxyz0123456789' /user", "gho_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"},
		{"github fine-grained", "export GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_token"},
		{"slack", "SLACK=xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl", "slack_token"},
		{"jwt", "token " + jwt, jwt, "jwt"},
		{"pem", "cat > k.pem <<'EOF'\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nEOF", "MIIEowIBAAKCAQEA", "private_key"},
		{"pem truncated", "cat <<EOF > k\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\nEOF", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "private_key"},
		{"pem flattened", `echo "-----BEGIN EC PRIVATE KEY----- MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oQsbVcN0o2b5oAoGCCqGSM49 AwEHoUQDQgAE4uE== -----END EC PRIVATE KEY-----"`, "AwEHoUQDQgAE4uE", "private_key"},
		{"pem escaped", `printf '%s' "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B2C3D\n\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi4VbOyO2Hd4Z1T5mTj1qS0vQ\nAB==\n-----END RSA PRIVATE KEY-----"`, "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi4", "private_key"},
		{"env token", "NPM_TOKEN=s3cr3tvalue npm publish", "s3cr3tvalue", "assignment"},
		{"env secret quoted", `export CLIENT_SECRET="hunter2-hunter2"`, "hunter2", "assignment"},
		{"env key", "OPENAI_API_KEY=sk-proj-abc123def", "sk-proj-abc123def", "assignment"},
		{"password", "mysql --user=x PASSWORD=pa55word", "pa55word", "assignment"},
		{"bearer header", `curl -H "Authorization: Bearer abc.def-ghi_jkl"`, "abc.def-ghi_jkl", "authorization"},
		{"bare bearer", "bearer 0123456789abcdef", "0123456789abcdef", "bearer"},
		{"url password", "psql postgres://admin:letmein@db:5432/x", "letmein", "url_password"},
		{"anthropic key", "export K=sk-ant-api03-abcdefghijklmnopqrstuvwxyz012", "abcdefghijklmnopqrstuvwxyz012", "api_key"},
		{"stripe key", "curl -d k=sk_live_abcdefghijklmnop1234 x", "abcdefghijklmnop1234", "stripe_key"},
		{"npm token", "npm config set //r.example/:_authToken npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_token"},
		{"authorization without a scheme", `curl -H 'Authorization: abcdef0123456789xyz' x`, "abcdef0123456789xyz", "authorization"},
		{"mysql", "mysql -uroot -phunter2pass db", "hunter2pass", "cli_password"},
		{"docker login", "docker login -u me -p hunter2pass reg.example", "hunter2pass", "cli_password"},
		{"password option", "pg_dump --password hunter2pass db", "hunter2pass", "cli_password"},
		{"curl user", "curl -u admin:hunter2pass https://x", "hunter2pass", "basic_auth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, _ := json.Marshal(map[string]string{"command": tc.in})
			out, digest := Redact(in)
			if strings.Contains(string(out), tc.secret) {
				t.Fatalf("secret survived: %s", out)
			}
			if !strings.Contains(string(out), Redacted+":"+tc.label+"]") {
				t.Fatalf("want label %s in %s", tc.label, out)
			}
			if !json.Valid(out) || !strings.HasPrefix(digest, "sha256:") || len(digest) != 71 {
				t.Fatalf("bad output %s / digest %s", out, digest)
			}
		})
	}
}

// TestRedactKeepsCode: a redaction takes a secret's text, never a command's: a key's header
// with code after it, or a secret-named value that is a substitution, leaves what runs in
// the record.
func TestRedactKeepsCode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, visible string }{
		{"python3 -c \"print(1) # -----BEGIN RSA PRIVATE KEY-----\nimport os; os.system('touch HIDDEN')\"", "import os; os.system('touch HIDDEN')"},
		{": -----BEGIN X PRIVATE KEY-----; touch HIDDEN1", "; touch HIDDEN1"},
		{"echo -----BEGIN RSA PRIVATE KEY-----\nrm -rf build\n-----END RSA PRIVATE KEY-----", "rm -rf build"},
		{`x_token="$(touch HIDDEN2)"`, "$(touch HIDDEN2)"},
		{"x_token=$(touch HIDDEN3)", "$(touch HIDDEN3)"},
		{"API_KEY=`touch HIDDEN4`", "`touch HIDDEN4`"},
		{`echo "x_secret='$(touch HIDDEN5)'"`, "$(touch HIDDEN5)"},
		{"curl https://u:a;touch${IFS}HIDDEN6;b@x", "touch${IFS}HIDDEN6"},
		{"curl https://u:$(touch${IFS}HIDDEN7)@x", "$(touch${IFS}HIDDEN7)"},
		// A quote inside the other kind is text: the span between is commands.
		{`echo "x_token='"; touch HIDDEN8; echo "'"`, "touch HIDDEN8"},
		{`echo 'x_password="'; touch HIDDEN9; echo '"'`, "touch HIDDEN9"},
		{"echo hi x_token=>HIDDEN10", ">HIDDEN10"},
		{"cat x_secret=<file", "<file"},
		{`x_token='a|b' y`, "a|b"},
		// A backslash may be what made the next quote text.
		{`echo x_token=a\' ; touch HIDDEN11 ; echo \'`, "touch HIDDEN11"},
		{`echo "x_token=abc\" ; touch HIDDEN12 ; echo \""`, `abc\"`},
		// A value the line uses again may be what it runs.
		{"API_TOKEN='touch HIDDEN13'; $API_TOKEN; ls", "touch HIDDEN13"},
		{`GH_TOKEN='sh -c id'; eval "$GH_TOKEN"`, "sh -c id"},
		{`MY_SECRET=HIDDEN14; bash -c "${MY_SECRET}"`, "HIDDEN14"},
		{`db_password=HIDDEN15; r=db_password; ${!r}`, "HIDDEN15"},
		// Or read by a program by a name the text never spells, and run.
		{`export API_TOKEN='touch HIDDEN16'; env | sed -n 's/^API_TOK[E]N=//p' | sh`, "touch HIDDEN16"},
		{`GH_TOKEN='touch HIDDEN17' python3 -c 'import os;os.system(os.environ["GH_"+"TOKEN"])'`, "touch HIDDEN17"},
		{`X_SECRET=/tmp/HIDDEN18.sh make`, "/tmp/HIDDEN18.sh"},
		// Or by any program the line runs (a Makefile's $(API_TOKEN), a script's).
		{`API_TOKEN='echo HIDDEN19' make -f Makefile.t run`, "echo HIDDEN19"},
		{`API_TOKEN='echo HIDDEN20' bash s.sh`, "echo HIDDEN20"},
		{`X_TOKEN=id ./run.sh`, "X_TOKEN=id"},
		// The policy's facts hold a command's words unquoted: a kept value is kept whole.
		{`{"prefix":["DB_PASSWORD=hunter2 HIDDEN21","true"]}`, "hunter2 HIDDEN21"},
	} {
		if got := RedactString(tc.in); !strings.Contains(got, tc.visible) {
			t.Errorf("%q: redacted to %q, hiding %q", tc.in, got, tc.visible)
		}
	}
	// A value only assigned, or whose name is only a part of another word, is still hidden.
	for _, in := range []string{"API_TOKEN=s3cr3tvalue gh api /user", "export API_TOKEN=s3cr3tvalue; echo $API_TOKEN_OLD",
		"my.api-key: s3cr3tvalue my", `{"prefix":["export","DB_PASSWORD=s3cr3tvalue tail-s3cr3tvalue"]}`} {
		if got := RedactString(in); strings.Contains(got, "s3cr3tvalue") {
			t.Errorf("%q kept its secret: %q", in, got)
		}
	}
	// A secret with a dollar sign in it, quoted, is still a secret.
	if got := RedactString(`PASSWORD='pa$$word'`); strings.Contains(got, "word'") {
		t.Errorf("a quoted password survived: %q", got)
	}
}

// TestRedactCommandKeepsWhatRuns: in a command line, a secret goes only where the shell takes
// it as data. A pattern that reaches past a line break or a word's end, or a value the line
// runs (as a program, through a wrapper, a function, an expansion, or an interpreter fed the
// text), leaves the record showing what ran.
func TestRedactCommandKeepsWhatRuns(t *testing.T) {
	t.Parallel()
	payload := "aWQgPiAvaG9tZS9mY19hL3Byb2ovaGlkZGVuX3BheWxvYWRfcmFuOyBlY2hvIEhJRERFTi1SQU4gIA=="
	slashes := "/bin" + strings.Repeat("/", 40) + "sh"
	tok := "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	for _, tc := range []struct{ in, visible string }{
		{"echo Bearer\n~/proj/evil.sh", "~/proj/evil.sh"},
		{"echo --password\n~/proj/evil.sh", "~/proj/evil.sh"},
		{"echo Authorization:\n/home/u/evil", "/home/u/evil"},
		{"sshpass -p\n/home/u/evil", "/home/u/evil"},
		{"sed 1d <<E | base64 -d | sh\n-----BEGIN RSA PRIVATE KEY-----\n" + payload + "\nE", payload},
		{"base64 -d <<E > x.sh; bash x.sh\n-----BEGIN RSA PRIVATE KEY-----\n" + payload + "\n-----END RSA PRIVATE KEY-----\nE", payload},
		{"cat <<'E' | python3\n-----BEGIN RSA PRIVATE KEY-----\n" + payload + "\n-----END RSA PRIVATE KEY-----\nE", payload},
		{"echo '-----BEGIN RSA PRIVATE KEY-----\n" + payload + "\n-----END RSA PRIVATE KEY-----' > k.sh; bash k.sh", payload},
		{": -----BEGIN RSA PRIVATE KEY-----\n" + slashes + " payload\n-----END RSA PRIVATE KEY-----", slashes},
		{"-----BEGIN RSA PRIVATE KEY-----\n/home/u/p" + strings.Repeat("/", 40) + "evil\n-----END RSA PRIVATE KEY-----", "evil"},
		{tok + " --now", tok},
		{"./" + tok, tok},
		{"timeout 5 " + tok, tok},
		{`\timeout 5 ` + tok, tok},
		{"ti\\\nmeout 5 " + tok, tok},
		{`"time"out 5 ` + tok, tok},
		{"x=" + tok + "; $x", tok},
		{"f() { \"$@\"; }; f " + tok, tok},
		{"echo \"$(echo Bearer " + tok + ")\"", tok},
		{"$(echo " + tok + ")", tok},
		{"alias a=echo\na " + tok, tok},
		{"if true; then\n" + tok + "\nfi", tok},
		{"echo " + tok + " | psql", tok},
		// Through an expansion, another name or the environment of a shell, a value or an
		// argument may be what runs; text that could name a file is never hidden.
		{"declare -n r=authorization; authorization=" + tok + "; $r", tok},
		{"export authorization=" + tok + "; $(printenv authorization)", tok},
		{"DEPLOY_TOKEN=" + tok + " env | grep -m1 ^DEPLOY | cut -d= -f2 | \\bash", tok},
		{"PS4='$(echo " + tok + ")'; set -x; true", tok},
		{"./run.sh Bearer tools/evil.sh", "tools/evil.sh"},
		{"echo 'Bearer " + tok + "' > x.sh && chmod +x x.sh && ./x.sh", tok},
		{"cat > y.sh <<'EOF'\n-----BEGIN RSA PRIVATE KEY-----\n" + payload + "\n-----END RSA PRIVATE KEY-----\nEOF\n./y.sh", payload},
		{"repeat 1 bash -ec 'echo Bearer " + tok + "'", tok},
		{"=bash -ec 'echo Bearer " + tok + "'", tok},
		{"git add . && git push", "git add ."},
		// A script written by an emitter and run by a bare name or a build tool; a value with
		// blanks (a command line) run through ${!v} or from the environment.
		{"cat > kk <<'E'\n-----BEGIN RSA PRIVATE KEY-----\n" + payload + "\n-----END RSA PRIVATE KEY-----\nE\nchmod +x kk; PATH=.:$PATH kk", payload},
		{"cat > t.sh <<'E'\na_token='touch pwned2 pwned3'\nfor v in $(compgen -v); do ${!v}; done\nE\nnpm test", "touch pwned2 pwned3"},
		{"export a_token='touch pwnedENV1 pwnedENV2'\nnpm test", "touch pwnedENV1 pwnedENV2"},
		// A runner's words are a command's, its own options' values too.
		{"sshpass -p " + tok + " ssh host", tok},
		{"git -c core.sshCommand=" + tok + " fetch", tok},
		{"git myalias " + tok, tok},
		{"docker run --rm img " + tok, tok},
	} {
		js, _ := json.Marshal(map[string]string{"command": tc.in})
		if out, _ := Redact(js); !strings.Contains(string(out), strings.ReplaceAll(tc.visible, `"`, `\"`)) {
			t.Errorf("%q: recorded as %s, hiding %q", tc.in, out, tc.visible)
		}
	}
	// In other text (a file's content) what names a file is a secret like any other.
	if got := RedactString("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"); strings.Contains(got, "K7MDENG") {
		t.Errorf("a secret with a slash in a file's content: %q", got)
	}
	// Data stays hidden: an argument, an assigned value, a key written to a file.
	for _, in := range []string{
		`curl -H "Authorization: Bearer s3cr3tvalue" https://x | jq .`,
		"export GH_TOKEN=ghp_s3cr3tvalueabcdefghijklmnopqrstuvwxyz01",
		"cat > id <<'EOF'\n-----BEGIN RSA PRIVATE KEY-----\nMIIs3cr3tvalue\n-----END RSA PRIVATE KEY-----\nEOF\nchmod 600 id",
		"git clone https://ghp_s3cr3tvalueabcdefghijklmnopqrstuvwxyz01@github.com/o/r",
		"docker login -u me -p s3cr3tvalue reg.example && docker push reg.example/x",
		// A lone "." is an argument, not bash's source.
		"git add . && git push https://me:s3cr3tvalue@github.com/o/r.git",
		"docker build -t app . && docker login -u me -p s3cr3tvalue",
		// Two patterns: the second is placed in the text the first left.
		"docker login -p hunter2pass r && gh api -H 'x: ghp_s3cr3tvalueabcdefghijklmnopqrstuvwxyz01' /u",
		"gh api -H 'x: ghp_abcdefghijklmnopqrstuvwxyz0123456789' /u && docker login -p s3cr3tvalue r",
	} {
		js, _ := json.Marshal(map[string]string{"command": in})
		if out, _ := Redact(js); strings.Contains(string(out), "s3cr3tvalue") {
			t.Errorf("%q kept its secret: %s", in, out)
		}
	}
}

func TestRedactKeysDigestAndPassThrough(t *testing.T) {
	t.Parallel()
	out, d1 := Redact(json.RawMessage(`{"b":1.50,"password":"x","a":["ls -la","git status && echo <ok>"],"headers":{"X-Api-Key":"zzz"}}`))
	want := `{"a":["ls -la","git status && echo <ok>"],"b":1.50,"headers":{"X-Api-Key":"[REDACTED:by_key]"},"password":"[REDACTED:by_key]"}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	_, d2 := Redact(json.RawMessage(`{ "headers":{"X-Api-Key":"zzz"}, "a":["ls -la","git status && echo <ok>"], "password":"x", "b":1.50 }`))
	_, d3 := Redact(json.RawMessage(`{"b":1.50,"password":"y","a":["ls -la","git status && echo <ok>"],"headers":{"X-Api-Key":"zzz"}}`))
	if d1 != d2 {
		t.Error("digest depends on key order or whitespace")
	}
	if d1 == d3 {
		t.Error("digest does not depend on the redacted secret")
	}
	if out, d := Redact(json.RawMessage(`{"a":`)); string(out) != `"[REDACTED:invalid_json]"` || d == "" {
		t.Errorf("invalid json: %s %s", out, d)
	}
}

func TestDetailIsRedactedToo(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{})
	defer l.Close()
	r := &Record{Kind: KindApprovalRequest, Detail: map[string]string{"command": "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789 make"}}
	if err := l.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(l.w.f.Name())
	if strings.Contains(string(b), "ghp_abc") || !strings.Contains(string(b), "GITHUB_TOKEN=[REDACTED:github_token]") {
		t.Fatalf("detail not redacted: %s", b)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	var syn json.SyntaxError
	cases := []struct {
		err  error
		want errcode.Code
	}{
		{nil, errcode.OK},
		{errcode.New(errcode.OOM, errors.New("memory.max hit")), errcode.OOM},
		{fmt.Errorf("wrap: %w", errcode.New(errcode.PidsLimit, nil)), errcode.PidsLimit},
		{fmt.Errorf("open /x: %w", syscall.ENOENT), errcode.ErrnoENOENT},
		{&fs.PathError{Op: "open", Path: "/x", Err: syscall.EACCES}, errcode.ErrnoEACCES},
		{syscall.ENOSPC, errcode.ErrnoENOSPC},
		{context.DeadlineExceeded, errcode.Timeout},
		{os.ErrDeadlineExceeded, errcode.Timeout},
		{context.Canceled, errcode.Cancelled},
		{fmt.Errorf("decode: %w", &syn), errcode.BadRequest},
		{&exec.ExitError{}, errcode.ToolFailed},
		{exec.ErrNotFound, errcode.ErrnoENOENT},
		{fs.ErrInvalid, errcode.Validation},
		{ErrClosed, errcode.AuditUnavailable},
		{errors.New("something with /etc/shadow in it"), errcode.Internal},
	}
	for _, tc := range cases {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// TestRedactMarshaled: for JSON encoding/json made, RedactMarshaled redacts what Redact does,
// and leaves JSON without a secret hint untouched (not even re-encoded).
func TestRedactMarshaled(t *testing.T) {
	// The premise: encoding/json writes every hint verbatim, in keys and in strings, next to
	// characters it does escape.
	for _, h := range allSecretHints {
		js, err := json.Marshal(map[string]string{"<" + string(h) + ">": "&" + string(h) + "\u2028"})
		if err != nil {
			t.Fatal(err)
		}
		if c := bytes.Count(bytes.ToLower(js), h); c != 2 {
			t.Errorf("hint %q appears %d times in %s, want 2", h, c, js)
		}
	}
	for _, v := range []any{
		map[string]any{"argv": []string{"/bin/true"}, "cwd": "/work/<a&b>", "n": 1.5},
		map[string]any{"API_KEY": "abc", "nested": map[string]any{"Authorization": "Bearer xyz"}},
		map[string]any{"cmd": "curl https://user:hunter2@example.com/x", "z": []any{"AKIAABCDEFGHIJKLMNOP"}},
		map[string]any{"cmd": "echo ghp_" + strings.Repeat("a", 36)},
		struct {
			Zeta  string `json:"zeta"`
			Alpha string `json:"alpha"`
		}{"x", "password=hunter2"},
	} {
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Redact(js)
		got := RedactMarshaled(js)
		var a, b any
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: RedactMarshaled %s, Redact %s", js, got, want)
		}
		if !mayHoldSecret(js) && !bytes.Equal(got, js) {
			t.Errorf("%s without a hint came back changed: %s", js, got)
		}
	}
}

// FuzzRedactCommand: whatever the line, redaction changes no command it runs: the line as
// recorded names the same programs, in the same order, as the line that ran.
func FuzzRedactCommand(f *testing.F) {
	for _, s := range []string{"echo Bearer\n./evil.sh", `curl -H "Authorization: Bearer abcdefghijk" x`,
		"cat > k <<'E'\n-----BEGIN RSA PRIVATE KEY-----\nMIIabcdefghijabcdefghijabcdefghijabcdefghij\n-----END RSA PRIVATE KEY-----\nE",
		"export GH_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789; gh pr list", "x=sk-abcdefghijklmnopqrstuvwx; $x"} {
		f.Add(s)
	}
	names := func(s string) []string {
		f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(s), "")
		if err != nil {
			return nil
		}
		var out []string
		syntax.Walk(f, func(n syntax.Node) bool {
			if c, ok := n.(*syntax.CallExpr); ok && len(c.Args) > 0 {
				out = append(out, s[c.Args[0].Pos().Offset():c.Args[0].End().Offset()])
			}
			return true
		})
		return out
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		got := RedactCommand(s)
		if got == s {
			return
		}
		if a, b := names(s), names(got); !reflect.DeepEqual(a, b) {
			t.Fatalf("RedactCommand(%q) = %q: runs %q, recorded as %q", s, got, a, b)
		}
	})
}
