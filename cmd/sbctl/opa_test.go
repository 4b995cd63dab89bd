package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A custom module as an admin writes one, calling a sandboxd builtin, with its test.
const (
	customRego = `package sandboxd.custom

deny contains "writes outside the work tree" if {
	some p in input.paths
	p.access == "write"
	not sandboxd.path_within(p.resolved, input.workdirs)
}
`
	customTestRego = `package sandboxd.custom_test

import data.sandboxd.custom

test_write_outside_denied if {
	count(custom.deny) == 1 with input as {"workdirs": ["/w"], "paths": [{"access": "write", "resolved": "/etc/passwd"}]}
}

test_write_inside_allowed if {
	count(custom.deny) == 0 with input as {"workdirs": ["/w"], "paths": [{"access": "write", "resolved": "/w/a"}]}
}
`
	// failingTestRego is a test that fails, for the exit code.
	failingTestRego = `package sandboxd.custom_test

test_fails if {
	sandboxd.abs_path("a", "/w", "/h") == "/elsewhere"
}
`
	undefinedRego = `package sandboxd.custom

deny contains "x" if sandboxd.no_such_builtin(input.tool)
`
)

func writeRego(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestOPA runs `sbctl opa` as an admin would, through sbctl's exec of sbctl-full: OPA's own
// commands over the embedded policy and a custom one, with the sandboxd builtins known, and
// the stock tool's exit codes.
func TestOPA(t *testing.T) {
	b := buildClientBins(t)
	policyDir := filepath.Join("..", "..", "policy")
	rego := filepath.Join(policyDir, "rego")
	custom := writeRego(t, map[string]string{"custom.rego": customRego, "custom_test.rego": customTestRego})
	failing := writeRego(t, map[string]string{"custom.rego": customRego, "custom_test.rego": failingTestRego})
	undefined := writeRego(t, map[string]string{"custom.rego": undefinedRego})
	goVersion, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/open-policy-agent/opa").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		// wantOut must be in stdout, wantErr in stderr.
		wantOut, wantErr string
		// emptyOut: stdout must be empty.
		emptyOut bool
	}{
		{name: "check embedded with the capabilities file", args: []string{"check", "--strict", "--capabilities", filepath.Join(policyDir, "capabilities.json"), rego}, emptyOut: true},
		{name: "check embedded with its own capabilities", args: []string{"check", "--strict", rego}, emptyOut: true},
		{name: "test embedded", args: []string{"test", rego}, wantOut: "PASS: "},
		{name: "fmt embedded is clean", args: []string{"fmt", "--fail", "-l", rego}, emptyOut: true},
		{name: "eval a builtin", args: []string{"eval", "--format", "raw", `sandboxd.abs_path("~/src", "/work", "/home/alice")`}, wantOut: "/home/alice/src\n"},
		{name: "check custom", args: []string{"check", "--strict", "--capabilities", filepath.Join(policyDir, "capabilities.json"), custom}, emptyOut: true},
		{name: "test custom", args: []string{"test", "-v", custom}, wantOut: "test_write_outside_denied: PASS"},
		// A failing test exits 2 and an undefined function 1, as the stock opa does.
		{name: "failing test", args: []string{"test", failing}, wantCode: 2, wantOut: "test_fails: FAIL"},
		{name: "undefined builtin", args: []string{"check", "--strict", undefined}, wantCode: 1, wantErr: "undefined function sandboxd.no_such_builtin"},
		// The linked OPA release is go.mod's.
		{name: "version", args: []string{"version"}, wantOut: "Version: " + strings.TrimPrefix(strings.TrimSpace(string(goVersion)), "v") + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(b.sbctl, append([]string{"opa"}, tc.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode || !strings.Contains(stdout.String(), tc.wantOut) || !strings.Contains(stderr.String(), tc.wantErr) ||
				(tc.emptyOut && stdout.Len() > 0) {
				t.Errorf("sbctl opa %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, tc.wantCode, stdout.String(), stderr.String())
			}
		})
	}
}
