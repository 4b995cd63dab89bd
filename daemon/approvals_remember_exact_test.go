package daemon

import (
	"fmt"
	"github.com/sandboxd/sandboxd/approval"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestRememberedRuleIsTheApprovedPath: "allow and remember" of a write to a file whose name
// holds glob characters remembers a rule for that file alone, not a pattern the name spells.
func TestRememberedRuleIsTheApprovedPath(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	for _, name := range []string{"*", "[a-z]*", "x?", `back\slash*`} {
		t.Run(name, func(t *testing.T) {
			s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
			defer td.do(t, "DELETE", "/v1/sessions/"+s.ID, "")
			target := filepath.Join(dir, name)
			r := td.callRaw(t, s.ID, callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, target), ""))
			if behavior(r) != permission.Ask || r.ApprovalID == "" {
				t.Fatalf("want an ask: %+v", r.Decision)
			}
			if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow","remember":"session"}`); code != 200 {
				t.Fatalf("allow and remember: %d %s", code, b)
			}
			other := filepath.Join(dir, "other-"+fmt.Sprint(len(name)))
			r = td.callRaw(t, s.ID, callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, other), ""))
			if behavior(r) == permission.Allow {
				t.Errorf("the rule remembered for %q allowed %s: %+v", target, other, r.Decision)
			}
			if _, err := os.Stat(other); err == nil {
				t.Errorf("%s was written", other)
			}
			r = td.callRaw(t, s.ID, callBody("Write", fmt.Sprintf(`{"file_path":%q,"content":"y"}`, target), ""))
			if behavior(r) != permission.Allow {
				t.Errorf("the remembered rule does not allow %s again: %+v", target, r.Decision)
			}
		})
	}
}

// TestSuggestedBashRulesHoldNoStar: a Bash rule cannot quote a `*`, so a command word holding
// one is never put in a suggested rule, where it would be a wildcard (the word `*` made
// Bash(*:*), every command); nor a word with a blank or a parenthesis, whose end the rule
// cannot say.
func TestSuggestedBashRulesHoldNoStar(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	for _, cmd := range []string{`'*' x`, `./run* now`, `watch 'rm *'`, `setsid 'x*'`, `find . -name '*.o' -exec rm {} +`,
		`'my tool' sub x`, `mytool 'a)b' x`, `mytool 'a b'`} {
		r := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":%q}`, cmd), ""))
		if r.ApprovalID == "" {
			continue
		}
		rules := suggestedRules(t, td, r.ApprovalID)
		t.Logf("%s: %q", cmd, rules)
		for _, rule := range rules {
			inner := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(rule, "Bash("), ")"), ":*")
			if strings.ContainsAny(inner, "*()") || strings.Contains(inner, "my tool") || strings.Contains(inner, "a b") {
				t.Errorf("%s: suggested %s", cmd, rule)
			}
		}
	}
}

// TestWebFetchHostIsNoPattern: a WebFetch host with a wildcard character is refused before it
// is decided, so no approval suggests WebFetch(domain:*.com) for it.
func TestWebFetchHostIsNoPattern(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	for _, u := range []string{"https://*.com/", "https://ex?mple.com/", "https://[a-z].com/"} {
		r := td.callRaw(t, s.ID, callBody("WebFetch", fmt.Sprintf(`{"url":%q,"prompt":"p"}`, u), ""))
		if r.ApprovalID != "" || behavior(r) == permission.Allow {
			t.Errorf("%s: %+v approval %q", u, r.Decision, r.ApprovalID)
		}
	}
	// A plain name still asks, and suggests its own domain.
	r := td.callRaw(t, s.ID, callBody("WebFetch", `{"url":"https://example.com/","prompt":"p"}`, ""))
	if r.ApprovalID == "" {
		t.Fatalf("a plain host: %+v", r.Decision)
	}
}

// TestSuggestedRulesOfRunnersAreWhole: a program that runs what its words say (env, a shell,
// an interpreter, a runner) allowed by its name allows every command (Bash(env:*) runs
// `env sh -c …`), so an approval suggests only its whole line; other programs keep their
// prefix rule.
func TestSuggestedRulesOfRunnersAreWhole(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	suggested := func(cmd string) []string {
		t.Helper()
		r := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":%q}`, cmd), ""))
		if r.ApprovalID == "" {
			t.Fatalf("%s: no approval: %+v", cmd, r.Decision)
		}
		return suggestedRules(t, td, r.ApprovalID)
	}
	for cmd, want := range map[string]string{
		"env LC_ALL=C make -k":          "Bash(env LC_ALL=C make -k)",
		"python3 -c pass":               "Bash(python3 -c pass)",
		"node -e 1":                     "Bash(node -e 1)",
		"npx -y cowsay hi":              "Bash(npx -y cowsay hi)",
		"bash build.sh --release":       "Bash(bash build.sh --release)",
		"nohup ./serve --port 8080":     "Bash(./serve:*)",
		"make build -j4":                "Bash(make build:*)",
		"npm exec -- id":                "Bash(npm exec -- id)",
		"git bisect run id":             "Bash(git bisect run id)",
		"tar -xf x.tar --to-command=id": "Bash(tar -xf x.tar --to-command=id)",
		"git -c core.pager=id log":      "Bash(git -c core.pager=id log)",
		"docker run alpine id":          "Bash(docker run alpine id)",
		"expect -c exit":                "Bash(expect -c exit)",
		"git commit -m fix":             "Bash(git commit:*)",
		"go test -exec id ./...":        "Bash(go test -exec id ./...)",
		"go build -toolexec id .":       "Bash(go build -toolexec id .)",
		"pytest -p foo":                 "Bash(pytest -p foo)",
		"cc x.c -wrapper id":            "Bash(cc x.c -wrapper id)",
		"go test -run TestX ./...":      "Bash(go test:*)",
	} {
		if got := suggested(cmd); len(got) == 0 || got[0] != want {
			t.Errorf("%s: suggested %q, want %s first", cmd, got, want)
		}
	}
	if got := suggested(`bash -c 'echo hi'`); len(got) != 0 {
		t.Errorf("bash -c 'echo hi': suggested %q, a rule that cannot say its word with a blank", got)
	}
}

// suggestedRules are the rules the pending approval id suggests, as the approvals list shows.
func suggestedRules(t *testing.T, td *testDaemon, id string) []string {
	t.Helper()
	_, b := td.do(t, "GET", "/v1/approvals", "")
	var list struct {
		Approvals []struct {
			ID             string   `json:"id"`
			SuggestedRules []string `json:"suggested_rules"`
		} `json:"approvals"`
	}
	decodeInto(t, b, &list)
	for _, a := range list.Approvals {
		if a.ID == id {
			return a.SuggestedRules
		}
	}
	t.Fatalf("approval %s not listed", id)
	return nil
}

// TestApprovalsCountTheParsedCommand: a call waiting on its approval holds its command parsed,
// and the queue counts that against its owner: 256 pending Bash calls of 60 KB of words each
// held 490 MB of the daemon's heap while the queue counted 30 MB.
func TestApprovalsCountTheParsedCommand(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, rootDir(t)))
	words := strings.Repeat(" a", 30000)
	queued := 0
	for i := range 64 {
		r := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":%q}`, fmt.Sprintf("foo%d%s", i, words)), ""))
		if r.ApprovalID == "" {
			if r.Error == nil || !strings.Contains(r.Error.Message, "approval queue is full") {
				t.Fatalf("call %d: neither queued nor refused for a full queue: %+v %+v", i, r.Decision, r.Error)
			}
			break
		}
		queued++
	}
	if queued == 0 || queued >= 32 {
		t.Errorf("%d calls of 30 000 words queued; each holds over a megabyte parsed, so at most %d MiB of them fit", queued, approval.MaxPendingBytesPerOwner>>20)
	}
}

// TestRememberKeepsEveryCommandsRule: "allow and remember" of a compound line remembers the rule
// suggested for each of its commands that asked, so the same line runs next time unasked.
// Remembering the first alone (git add) asked again for the commit.
func TestRememberKeepsEveryCommandsRule(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	line := callBody("Bash", `{"command":"mkdir -p d && touch d/x"}`, "")
	r := td.callRaw(t, s.ID, line)
	if behavior(r) != permission.Ask || r.ApprovalID == "" {
		t.Fatalf("want an ask: %+v", r.Decision)
	}
	code, b := td.answer(t, r.ApprovalID, `{"answer":"allow","remember":"session"}`)
	if code != 200 || !strings.Contains(string(b), `"rules":[`) {
		t.Fatalf("allow and remember: %d %s", code, b)
	}
	if r := td.callRaw(t, s.ID, line); behavior(r) != permission.Allow {
		t.Errorf("the same line after allow and remember: %s (%s)", behavior(r), r.Decision.Reason)
	}
}
