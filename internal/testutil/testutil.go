// Package testutil holds test helpers with no contract.
package testutil

import (
	"os"
	"testing"
)

// RequireRoot skips t unless it runs as root. With SANDBOXD_REQUIRE_ROOT=1 (set by CI, which
// runs as root) a missing root is a failure, so a root-only check can never be skipped silently there.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("SANDBOXD_REQUIRE_ROOT") == "1" {
		t.Fatal("requires root and SANDBOXD_REQUIRE_ROOT=1 is set")
	}
	t.Skip("requires root; run: go test -exec sudo ./...")
}
