package policy

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

var update = flag.Bool("update", false, "rewrite capabilities.json from the engine's capabilities")

// capabilitiesFile is what a stock opa is given (--capabilities) to know the sandboxd.*
// builtins; policy/README.md says how to use it.
const capabilitiesFile = "capabilities.json"

// capabilitiesJSON is capabilities.json as the engine compiles against it: OPA's builtins of
// the linked version minus those capabilities() drops, plus sandboxd.*, in the layout of
// `opa capabilities --current`. The file is the daemon's set rather than stock OPA's with
// sandboxd.* added, so that a check that passes with it is one the daemon's load passes too
// (a custom module calling http.send fails both).
func capabilitiesJSON(t *testing.T) []byte {
	t.Helper()
	b, err := json.MarshalIndent(capabilities(), "", "  ")
	if err != nil {
		t.Fatalf("encode capabilities: %v", err)
	}
	return append(b, '\n')
}

// sandboxdDecls maps each sandboxd.* builtin to its declared type.
func sandboxdDecls(bs []*ast.Builtin) map[string]string {
	out := map[string]string{}
	for _, b := range bs {
		if strings.HasPrefix(b.Name, "sandboxd.") {
			out[b.Name] = b.Decl.String()
		}
	}
	return out
}

// TestCapabilitiesFile fails when capabilities.json and the registered builtins disagree: a
// builtin added, removed or retyped in builtins.go, a change to the builtins the engine drops,
// or an OPA upgrade. Refresh with -update and review the diff.
func TestCapabilitiesFile(t *testing.T) {
	want := capabilitiesJSON(t)
	if *update {
		if err := os.WriteFile(capabilitiesFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(capabilitiesFile)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./policy -run TestCapabilitiesFile -update)", err)
	}
	fc, err := ast.LoadCapabilitiesJSON(bytes.NewReader(got))
	if err != nil {
		t.Fatalf("load %s: %v", capabilitiesFile, err)
	}
	// The sandboxd.* builtins by name first, for a message that says which one.
	inFile, registered := sandboxdDecls(fc.Builtins), sandboxdDecls(ast.Builtins)
	if len(registered) == 0 {
		t.Fatal("no sandboxd.* builtin is registered")
	}
	names := map[string]bool{}
	for n := range inFile {
		names[n] = true
	}
	for n := range registered {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		f, inF := inFile[n]
		r, inR := registered[n]
		switch {
		case !inF:
			t.Errorf("%s is registered but not in %s", n, capabilitiesFile)
		case !inR:
			t.Errorf("%s is in %s but not registered", n, capabilitiesFile)
		case f != r:
			t.Errorf("%s: %s declares %s, registered %s", n, capabilitiesFile, f, r)
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the engine's capabilities make; run go test ./policy -run TestCapabilitiesFile -update and review the diff", capabilitiesFile)
	}
}

// opaCheck is `opa check --strict --capabilities` over paths, as OPA's cmd/check.go does it
// (the same loader and compiler options), with the capabilities given.
func opaCheck(c *ast.Capabilities, paths ...string) error {
	res, err := loader.NewFileLoader().
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		WithCapabilities(c).
		Filtered(paths, nil)
	if err != nil {
		return err
	}
	comp := ast.NewCompiler().
		WithCapabilities(c).
		WithEnablePrintStatements(true).
		WithStrict(true).
		WithUseTypeCheckAnnotations(true)
	if comp.Compile(res.ParsedModules()); comp.Failed() {
		return comp.Errors
	}
	return nil
}

// TestCapabilitiesFileChecksPolicy: the policy and its tests pass a strict check against
// capabilities.json alone, and fail it without the file's sandboxd.* entries (which is where a
// stock opa stands without the file), so it is the file that makes the check pass.
func TestCapabilitiesFileChecksPolicy(t *testing.T) {
	fc, err := ast.LoadCapabilitiesFile(capabilitiesFile)
	if err != nil {
		t.Fatalf("load %s: %v", capabilitiesFile, err)
	}
	if err := opaCheck(fc, "rego"); err != nil {
		t.Fatalf("opa check --strict --capabilities %s rego:\n%v", capabilitiesFile, err)
	}
	stock := *fc
	stock.Builtins = nil
	for _, b := range fc.Builtins {
		if !strings.HasPrefix(b.Name, "sandboxd.") {
			stock.Builtins = append(stock.Builtins, b)
		}
	}
	err = opaCheck(&stock, "rego")
	if err == nil || !strings.Contains(err.Error(), "undefined function sandboxd.") {
		t.Fatalf("check without the sandboxd.* declarations: got %v, want undefined function sandboxd.*", err)
	}
}
