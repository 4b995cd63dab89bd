package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/client"
)

func TestParseInterspersed(t *testing.T) {
	cases := []struct {
		args  []string
		pos   []string
		limit int
	}{
		{[]string{"FILE", "--limit", "3"}, []string{"FILE"}, 3},
		{[]string{"--limit", "3", "FILE"}, []string{"FILE"}, 3},
		{[]string{"A", "B", "--limit=2"}, []string{"A", "B"}, 2},
		{[]string{"--", "--limit", "3"}, []string{"--limit", "3"}, 0},
		{[]string{"A", "--", "-x"}, []string{"A", "-x"}, 0},
	}
	for _, tc := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		limit := fs.Int("limit", 0, "")
		pos, err := ParseInterspersed(fs, tc.args)
		if err != nil || !reflect.DeepEqual(pos, tc.pos) || *limit != tc.limit {
			t.Errorf("%q: pos %q limit %d err %v; want %q %d", tc.args, pos, *limit, err, tc.pos, tc.limit)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{}, 2, "usage"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"--help"}, 0, "usage"},
		{[]string{"classify", "--json", "--", "ls"}, 3, "heavy classify"},
		{[]string{"policy", "test"}, 3, "heavy policy"},
		{[]string{"audit", "verify", "--dir", "/x"}, 3, "heavy audit"},
		{[]string{"hook", "--on-unavailable", "allow"}, 2, "deny or ask"},
		{[]string{"--socket", "/nonexistent/sock", "status"}, 1, "cannot reach sandboxd"},
		{[]string{"session"}, 2, "subcommand"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		heavy := func(e *Env, name string, args []string) error {
			fmt.Fprintf(e.Stderr, "heavy %s %q", name, args)
			return &ExitError{Code: 3}
		}
		code := Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb, heavy)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("sbctl %q: exit %d, output %q %q; want %d mentioning %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
}

func TestContainmentIsReported(t *testing.T) {
	var errb bytes.Buffer
	e := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}
	res := &client.CallResult{Decision: &client.Decision{Behavior: client.Allow},
		Data: map[string]any{"pids_limited": true, "oom_killed": true, "killed_by": "timeout", "timed_out": true,
			"background_jobs_killed": float64(2)}}
	err := finishBash(e, res, false)
	for _, want := range []string{"process limit", "memory limit", "timeout", "killed: timeout", "left 2 background job(s)"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr %q lacks %q", errb.String(), want)
		}
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 124 {
		t.Errorf("exit = %v, want 124", err)
	}
}

// An asked call tells the user how to run it: nobody can be asked from sbctl.
func TestAskSaysHowToRun(t *testing.T) {
	var errb bytes.Buffer
	e := &Env{Stdout: &bytes.Buffer{}, Stderr: &errb}
	res := &client.CallResult{Decision: &client.Decision{Behavior: client.Ask, Reason: "default mode: this call is not read-only; ask the user"},
		IsError: true, Content: []client.Block{{Type: "text", Text: "permission required: default mode"}}}
	err := finishBash(e, res, true)
	if !strings.Contains(errb.String(), "--mode bypassPermissions") || !strings.Contains(errb.String(), "decision: ask") {
		t.Errorf("stderr %q: no decision line or no way to run it", errb.String())
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 126 {
		t.Errorf("exit = %v, want 126", err)
	}
	errb.Reset()
	_ = finishBash(e, &client.CallResult{Decision: &client.Decision{Behavior: client.Deny}}, true)
	if strings.Contains(errb.String(), "--mode") {
		t.Errorf("a denied call suggests a mode: %q", errb.String())
	}
}
