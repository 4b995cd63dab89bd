package policy

import (
	"testing"

	"github.com/sandboxd/sandboxd/sandbox"
)

// TestProtectedNamesInStep: every path the kernel keeps read-only in a writable dir or the
// home (sandbox.ProtectedInDir, ProtectedInHome) is one the decision's safety check protects
// too, so a Write or a Bash command naming it asks rather than failing in the kernel after an
// allow. The home's program dirs and vim's are the home's alone (a project's bin/ is no
// start-up file): a rule of their own anchored at the home holds them (safety_test.rego).
func TestProtectedNamesInStep(t *testing.T) {
	re, err := ProtectedPathPattern()
	if err != nil {
		t.Fatal(err)
	}
	kernelOnly := map[string]bool{"bin": true, "go/bin": true, ".vim": true} // homeOnly
	for _, list := range [][]string{sandbox.ProtectedInDir, sandbox.ProtectedInHome} {
		for _, rel := range list {
			if got := re.MatchString("/w/" + rel); got == kernelOnly[rel] {
				t.Errorf("%s: the decision protects it %v, the kernel list says %v", rel, got, !kernelOnly[rel])
			}
		}
	}
}
