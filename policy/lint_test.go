package policy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
)

// TestRegoFormatted is `opa fmt --fail -l` for the embedded policy and its tests.
func TestRegoFormatted(t *testing.T) {
	mods, err := embeddedModules(true)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range mods {
		got, err := format.SourceWithOpts(name, []byte(src), format.Opts{RegoVersion: ast.RegoV1})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got, []byte(src)) {
			t.Errorf("%s is not opa fmt clean; formatted:\n%s", name, got)
		}
	}
}

// TestRegoStrict is `opa check --strict` for the policy and its tests, against the engine's
// reduced capabilities (no network builtins).
func TestRegoStrict(t *testing.T) {
	mods, err := embeddedModules(true)
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string]*ast.Module{}
	for name, src := range mods {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parsed[name] = m
	}
	c := ast.NewCompiler().WithStrict(true).WithCapabilities(caps()).WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(parsed); c.Failed() {
		t.Fatalf("strict compile: %v", c.Errors)
	}
}

// TestRegoLayout checks STYLE: policy/rego/<concern>/<concern>.rego is package
// sandboxd.<concern>, its tests sandboxd.<concern>_test, and no http.send or print.
func TestRegoLayout(t *testing.T) {
	mods, err := embeddedModules(true)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range mods {
		p := strings.TrimPrefix(name, "embedded:rego/")
		dir, file, _ := strings.Cut(p, "/")
		m := ast.MustParseModuleWithOpts(src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		want := "data.sandboxd." + dir
		if strings.HasSuffix(file, "_test.rego") {
			want += "_test"
		}
		if file != dir+".rego" && file != dir+"_test.rego" {
			t.Errorf("%s: file should be %s.rego or %s_test.rego", name, dir, dir)
		}
		if got := m.Package.Path.String(); got != want {
			t.Errorf("%s: package %s, want %s", name, got, want)
		}
		for _, bad := range []string{"http.send", "print("} {
			if strings.Contains(src, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
	}
}
