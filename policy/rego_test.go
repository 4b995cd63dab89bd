package policy

import (
	"context"
	"testing"
)

// TestRego runs every *_test.rego beside the policy through OPA's tester, with coverage, as
// `opa test --coverage --fail-on-empty` would in CI.
func TestRego(t *testing.T) {
	mods, err := embeddedModules(true)
	if err != nil {
		t.Fatal(err)
	}
	rep, text, err := runTests(context.Background(), mods, "")
	if err != nil {
		t.Fatalf("run rego tests: %v", err)
	}
	t.Logf("rego tests: %d pass, %d fail, %d errors\n%s", rep.Pass, rep.Fail, rep.Errors, text)
	if rep.Fail > 0 || rep.Errors > 0 || rep.Pass == 0 {
		t.Fatalf("rego tests failed:\n%s", text)
	}
}
