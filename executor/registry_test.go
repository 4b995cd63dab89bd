package executor

import (
	"reflect"
	"testing"
)

func TestPoolPartitionsBuiltinsThenExternal(t *testing.T) {
	var defs []Def
	for _, n := range []string{"Write", "mcp__b__z", "Bash", "mcp__a__y", "Read"} {
		d := bareDef(n)
		d.External = len(n) > 5 && n[:5] == "mcp__"
		defs = append(defs, d)
	}
	off := bareDef("Disabled")
	off.Enabled = func() bool { return false }
	defs = append(defs, off)
	r, err := NewRegistry(defs...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range r.Pool(func(n string) bool { return n == "Write" }) {
		got = append(got, tool.Name())
	}
	want := []string{"Bash", "Read", "mcp__a__y", "mcp__b__z"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pool = %v, want %v", got, want)
	}
}

func TestLookupAliasesAndSuggest(t *testing.T) {
	d := bareDef("Edit")
	d.Aliases = []string{"MultiEdit"}
	r, err := NewRegistry(d, bareDef("Read"), bareDef("Bash"))
	if err != nil {
		t.Fatal(err)
	}
	if tool, ok := r.Lookup("MultiEdit"); !ok || tool.Name() != "Edit" {
		t.Errorf("alias lookup = %v, %v", tool, ok)
	}
	if _, ok := r.Lookup("edit"); ok {
		t.Error("lookup is case-insensitive; names must match exactly")
	}
	if s := r.Suggest("Reed"); len(s) == 0 || s[0] != "Read" {
		t.Errorf("Suggest(Reed) = %v", s)
	}
	if _, err := NewRegistry(bareDef("Read"), bareDef("Read")); err == nil {
		t.Error("duplicate name accepted")
	}
}
