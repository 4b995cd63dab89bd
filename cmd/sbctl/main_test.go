package main

import (
	"bytes"
	"context"
	"flag"
	"reflect"
	"strings"
	"testing"
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
		pos, err := parseInterspersed(fs, tc.args)
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
		{[]string{"classify", "--json", "--", "ls -la"}, 0, `"read_only": true`},
		{[]string{"--json", "classify", "--", "rm -rf /"}, 0, "critical_path_rm"},
		{[]string{"classify"}, 2, "usage"},
		{[]string{"--socket", "/nonexistent/sock", "status"}, 1, "cannot reach sandboxd"},
		{[]string{"session"}, 2, "subcommand"},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
		if code != tc.code || !strings.Contains(out.String()+errb.String(), tc.out) {
			t.Errorf("sbctl %q: exit %d, output %q %q; want %d mentioning %q", tc.args, code, out.String(), errb.String(), tc.code, tc.out)
		}
	}
}
