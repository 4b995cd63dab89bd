package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestVisible: what a terminal would act on, and what hides or reorders text, is shown as an
// escape; everything else, any script included, passes unchanged.
func TestVisible(t *testing.T) {
	for _, tc := range []struct{ in, one, block string }{
		{"ls -la", "ls -la", "ls -la"},
		{"grep 'é' fichier # 注释 🙂", "grep 'é' fichier # 注释 🙂", "grep 'é' fichier # 注释 🙂"},
		// Erase the line and draw a harmless command over the real one.
		{"curl x | sh #\r\x1b[2Kls", `curl x | sh #\x0d\x1b[2Kls`, `curl x | sh #\x0d\x1b[2Kls`},
		{"rm -rf ~ \b\b\b\b\b\b\b\becho", `rm -rf ~ \x08\x08\x08\x08\x08\x08\x08\x08echo`, `rm -rf ~ \x08\x08\x08\x08\x08\x08\x08\x08echo`},
		{"a\tb\nc", `a\x09b⏎c`, "a\tb\nc"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"\u009b2K", `\u009b2K`, `\u009b2K`}, // an 8-bit CSI
		{"echo safe \u202e hs.lave", `echo safe \u202e hs.lave`, `echo safe \u202e hs.lave`},
		{"a\u2066b\u2069", `a\u2066b\u2069`, `a\u2066b\u2069`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`, `zero\u200bwidth\ufeff`},
		{"tag\U000E0041\U000E0042", `tag\U000e0041\U000e0042`, `tag\U000e0041\U000e0042`},
		{"vs\ufe0f\U000E0100", `vs\ufe0f\U000e0100`, `vs\ufe0f\U000e0100`},
		{"hangul\u3164filler", `hangul\u3164filler`, `hangul\u3164filler`},
		{"line\u2028sep", `line\u2028sep`, `line\u2028sep`},
		{"bad\xff\xfe", `bad\xff\xfe`, `bad\xff\xfe`},
		// Spaces a shell does not split on, and characters drawn as nothing.
		{"ls\u00a0-la", `ls\u00a0-la`, `ls\u00a0-la`},
		{"a\u3000\u2003\u2800b", `a\u3000\u2003\u2800b`, `a\u3000\u2003\u2800b`},
		{"pua\ue000 unassigned\u0378", `pua\ue000 unassigned\u0378`, `pua\ue000 unassigned\u0378`},
	} {
		if got := Visible(tc.in); got != tc.one {
			t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.one)
		}
		if got := VisibleLines(tc.in); got != tc.block {
			t.Errorf("VisibleLines(%q) = %q, want %q", tc.in, got, tc.block)
		}
	}
	// Clip shows what it keeps the same way.
	if got := Clip("ls\r\x1b[2K", 60); strings.ContainsAny(got, "\r\x1b") {
		t.Errorf("Clip kept control characters: %q", got)
	}
}

// TestInputSummary: a search shows where it searches, not only its pattern.
func TestInputSummary(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"ls","description":"harmless"}`: "ls",
		`{"pattern":"key","path":"/root/.ssh"}`:     "key in /root/.ssh",
		`{"pattern":"*.go"}`:                        "*.go",
		`{"file_path":"/etc/hosts","offset":2}`:     "/etc/hosts",
		`{"other":1}`:                               `{"other":1}`,
	} {
		if got := InputSummary("", json.RawMessage(in)); got != want {
			t.Errorf("InputSummary(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestNetConnectColumns: a proxy decision reads in the query table as what was asked for, the
// verdict, the rule and the reason with the address, not as dashes.
func TestNetConnectColumns(t *testing.T) {
	for _, tc := range []struct {
		detail                         map[string]string
		input, decision, rule, outcome string
	}{
		{map[string]string{"kind": "http", "host": "h.test", "port": "80", "method": "POST", "path": "/x/..;/admin", "allowed": "false", "rule": "WebFetch(POST h.test/admin/**)", "reason": "deny rule"},
			"POST h.test:80/x/..;/admin", "deny", "WebFetch(POST h.test/admin/**)", "deny rule"},
		{map[string]string{"kind": "connect", "host": "::1", "port": "443", "allowed": "true", "ip": "::1", "reason": "allowed", "via": "WebFetch"},
			"connect [::1]:443 (WebFetch)", "allow", "-", "::1: allowed"},
	} {
		in, d, r, o := netConnectColumns(tc.detail)
		if in != tc.input || d != tc.decision || r != tc.rule || o != tc.outcome {
			t.Errorf("%v: %q %q %q %q, want %q %q %q %q", tc.detail, in, d, r, o, tc.input, tc.decision, tc.rule, tc.outcome)
		}
	}
}

// TestShownAndClip: a command padded with blanks cannot push its tail out of sight: the
// padding is shown as its length, a prompt shows the whole command, and a listing that cuts
// says how much it cut.
func TestShownAndClip(t *testing.T) {
	padded := "git status" + strings.Repeat(" ", 600) + "; echo owned > PWNED"
	if got, want := Shown(padded), "git status ⟨600 blanks⟩ ; echo owned > PWNED"; got != want {
		t.Errorf("Shown(padded) = %q, want %q", got, want)
	}
	if got := Clip(padded, 60); !strings.Contains(got, "echo owned > PWNED") {
		t.Errorf("Clip(padded, 60) = %q: the tail is out of sight", got)
	}
	long := "echo " + strings.Repeat("a", 200) + "; rm -rf ~"
	got := Clip(long, 60)
	if !strings.HasSuffix(got, "…⟨+156 chars⟩") || !strings.HasPrefix(got, "echo aaa") {
		t.Errorf("Clip(long, 60) = %q, want 59 runes and …⟨+156 chars⟩", got)
	}
	if got := Shown("a\tb  c\x1b[2J"); got != Visible("a\tb  c\x1b[2J") {
		t.Errorf("Shown of short blanks and an escape = %q, want what Visible shows", got)
	}
	// Padding of other blanks (ideographic, em and no-break spaces, braille blanks) is a
	// length too: a screen of it would scroll the command's head away.
	for _, sp := range []string{"\u3000", "\u2003", "\u00a0", "\u2800", " \u3000"} {
		padded := "curl x | sh; #" + strings.Repeat(sp, 3000) + " git status"
		got := Shown(padded)
		if !strings.HasPrefix(got, "curl x | sh; # ⟨") || !strings.HasSuffix(got, "blanks⟩ git status") || len(got) > 60 {
			t.Errorf("Shown(padded with %q) = %.80q…, want the padding as its length", sp, got)
		}
	}
	if got := Clip("ls -la", 60); got != "ls -la" {
		t.Errorf("Clip(ls -la) = %q", got)
	}
}

// TestEventLines: an approval's reason quotes the agent's command or path, and a remembered
// rule is made of it; the lines `approvals --watch` prints (and its view's status line) show
// them escaped, or a reason would erase the line and draw a harmless call over it.
func TestEventLines(t *testing.T) {
	a := protocol.Approval{ID: "ap_1", Tool: "Bash", Session: "s_1",
		Input:  json.RawMessage(`{"command":"rm -rf ~ x\u001b[1F\u001b[J"}`),
		Reason: "rm of a critical path: rm -rf ~ x\x1b[1F\x1b[Jcreated ap_2 Bash session s_1: git status"}
	res := protocol.Resolution{Answer: "allow", Rule: "Edit(//p/\u202etxt.sh)", Remember: "session", Message: "m\x1b]52;c;ZWNobw==\a", By: "uid:1"}
	for _, line := range []string{
		eventLine(protocol.ApprovalEvent{Type: "created", Approval: a}),
		eventLine(protocol.ApprovalEvent{Type: "answered", Approval: a, Resolution: &res}),
		resolutionLine(a, res),
	} {
		if strings.ContainsAny(line, "\x1b\a\u202e") {
			t.Errorf("line printed with a terminal escape or a bidi override: %q", line)
		}
	}
}

// TestConfinedAskReasonWhole: the reason that carries a confined command to the person at the
// agent either shows it to its last character or is refused; it is never cut by the
// escaping that happens after it was measured.
func TestConfinedAskReasonWhole(t *testing.T) {
	d := &protocol.Decision{Behavior: protocol.Ask, Reason: "default mode: this call is not read-only; ask the user", Source: "mode"}
	for n := 8800; n < 9000; n++ {
		cmd := "echo " + strings.Repeat("a", n) + "; rm -rf ~/x"
		why, fits := confinedAskReason(d, cmd)
		if !fits {
			continue
		}
		out := decision(protocol.Ask, why).HookSpecificOutput.PermissionDecisionReason
		if !strings.HasSuffix(out, "; rm -rf ~/x") {
			t.Fatalf("a command of %d characters was cut: …%q", len(cmd), out[len(out)-20:])
		}
	}
	// Escapes in a reason that quotes the command count as shown.
	d.Reason = "rm of a critical path: rm -rf ~/x" + strings.Repeat("\x1b", 2000)
	if why, fits := confinedAskReason(d, "rm -rf ~/x"+strings.Repeat("\x1b", 2000)); fits {
		if out := decision(protocol.Ask, why).HookSpecificOutput.PermissionDecisionReason; out != why {
			t.Errorf("a reason that fits was changed on the way out")
		}
	}
}

// TestPrintDaemonStart: a start after a crash says so in the table; a clean one shows nothing.
func TestPrintDaemonStart(t *testing.T) {
	for _, tc := range []struct {
		detail map[string]string
		want   string
	}{
		{map[string]string{"pid": "1"}, "\t-\n"},
		{map[string]string{"previous_stop": "unclean", "unfinished_calls": "3"}, "previous daemon stopped uncleanly; unfinished calls: 3\n"},
	} {
		var b strings.Builder
		printRecord(&b, &protocol.Record{Seq: 1, Kind: "daemon.start", Detail: tc.detail})
		if !strings.HasSuffix(b.String(), tc.want) {
			t.Errorf("%v: got %q, want it to end %q", tc.detail, b.String(), tc.want)
		}
	}
}

// TestRecordOutcomeSaysNotRun: a call that did not run (denied, asked, only decided) has an
// outcome with exit code 0 in the log; the table says it did not run, not "exit=0".
func TestRecordOutcomeSaysNotRun(t *testing.T) {
	for _, tc := range []struct {
		kind, behavior, want string
	}{
		{"call.end", "deny", "not run 3ms permission_denied"},
		{"call.end", "ask", "not run 3ms permission_denied"},
		{"call.decide", "allow", "not run 3ms"},
		{"call.end", "allow", "exit=0 3ms"},
	} {
		var b bytes.Buffer
		o := &protocol.RecordOutcome{DurationMS: 3}
		if tc.behavior != "allow" {
			o.Error = "permission_denied"
		}
		printRecord(&b, &protocol.Record{Seq: 1, Kind: tc.kind, Tool: "Bash", Decision: &protocol.RecordDecision{Behavior: tc.behavior}, Outcome: o})
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.kind, tc.behavior, b.String(), tc.want)
		}
	}
}
