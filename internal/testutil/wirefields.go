package testutil

import (
	"reflect"
	"strings"
	"testing"
)

// SameJSONFields checks that wire, a protocol type standing for the daemon's type daemon, has
// exactly its JSON fields with the same tags and kinds, nested structs included; complete
// also requires every daemon field on the wire. A field added to the daemon's type and not to
// protocol's would otherwise silently drop out of the wire.
func SameJSONFields(t testing.TB, name string, wire, daemon any, complete bool) {
	t.Helper()
	compareFields(t, name, reflect.TypeOf(wire), reflect.TypeOf(daemon), complete)
}

func jsonFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t
}

func compareFields(t testing.TB, path string, wire, daemon reflect.Type, complete bool) {
	t.Helper()
	wf, df := jsonFields(wire), jsonFields(daemon)
	for name, f := range wf {
		g, ok := df[name]
		if !ok {
			t.Errorf("%s.%s: not in the daemon's type", path, name)
			continue
		}
		if f.Tag.Get("json") != g.Tag.Get("json") {
			t.Errorf("%s.%s: tag %q, the daemon's %q", path, name, f.Tag.Get("json"), g.Tag.Get("json"))
		}
		a, b := deref(f.Type), deref(g.Type)
		if a.Kind() != b.Kind() {
			t.Errorf("%s.%s: kind %s, the daemon's %s", path, name, a.Kind(), b.Kind())
			continue
		}
		if a.Kind() == reflect.Struct && a.PkgPath() != "time" {
			compareFields(t, path+"."+name, a, b, complete)
		}
	}
	if complete {
		for name := range df {
			if _, ok := wf[name]; !ok {
				t.Errorf("%s.%s: the daemon's type has it, protocol's does not", path, name)
			}
		}
	}
}
