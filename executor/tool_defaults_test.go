package executor

import (
	"context"
	"strings"
	"testing"
)

func bareDef(name string) Def {
	return Def{Name: name, Run: func(context.Context, *Call, Progress) (*Result, error) { return Text("ok"), nil }}
}

// A tool that declares nothing gets the fail-closed defaults.
func TestNewFailClosedDefaults(t *testing.T) {
	tool, err := New(bareDef("Bare"))
	if err != nil {
		t.Fatal(err)
	}
	in := Input{"x": "y"}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"enabled", tool.IsEnabled(), true},
		{"not read-only", tool.IsReadOnly(in), false},
		{"not concurrency-safe", tool.IsConcurrencySafe(in), false},
		{"destructive", tool.IsDestructive(in), true},
		{"not deferred", tool.ShouldDefer(), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if tool.MaxResultSizeChars() != DefaultMaxResultSizeChars {
		t.Errorf("MaxResultSizeChars = %d, want %d", tool.MaxResultSizeChars(), DefaultMaxResultSizeChars)
	}
	facts, err := tool.CheckPermissions(context.Background(), &Call{})
	if err != nil || len(facts.Paths) != 0 || facts.Bash != nil {
		t.Errorf("CheckPermissions default = %+v, %v; want empty facts", facts, err)
	}
	// The default empty schema admits only an empty object.
	if err := tool.ValidateSchema(map[string]any{"x": "y"}); err == nil {
		t.Error("default schema accepted an unknown property")
	}
}

// A read-only tool is not destructive unless it says so.
func TestDestructiveFollowsReadOnly(t *testing.T) {
	d := bareDef("Reader")
	d.ReadOnly = func(Input) bool { return true }
	tool, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	if tool.IsDestructive(Input{}) {
		t.Error("read-only tool defaulted to destructive")
	}
}

func TestNewRejectsBadDefs(t *testing.T) {
	cases := []struct {
		name string
		def  Def
	}{
		{"no name", Def{Run: bareDef("x").Run}},
		{"no run", Def{Name: "X"}},
		{"bad schema", Def{Name: "X", Run: bareDef("x").Run, Schema: `{"type": 12}`}},
		{"not json", Def{Name: "X", Run: bareDef("x").Run, Schema: `{`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.def); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

func TestSchemaErrorNamesTheField(t *testing.T) {
	d := bareDef("Typed")
	d.Schema = `{"type":"object","properties":{"file_path":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["file_path"],"additionalProperties":false}`
	tool, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		in    map[string]any
		field string
	}{
		{"wrong type", map[string]any{"file_path": 3}, "/file_path"},
		{"below minimum", map[string]any{"file_path": "/x", "limit": 0}, "/limit"},
		{"missing", map[string]any{}, "file_path"},
		{"extra", map[string]any{"file_path": "/x", "bogus": 1}, "bogus"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tool.ValidateSchema(tc.in)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %q", err, tc.field)
			}
		})
	}
}
