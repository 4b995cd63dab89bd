package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// A missing file's "Did you mean" never names a file a Read deny rule hides, by its name or
// where its directory really is; other near names are still suggested.
func TestNearNamesLeaveOutDenied(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cfg")
	for _, n := range []string{"id_rsa_prod", "id_rsa_pro.pub"} {
		if err := os.MkdirAll(cfg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg, n), []byte("k\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(cfg, link); err != nil {
		t.Fatal(err)
	}
	deny := []string{filepath.Join(cfg, "id_rsa_prod")}
	bg := context.Background()
	missing := func(t *testing.T, err error, shown, hidden string) {
		t.Helper()
		if errcode.Of(err) != errcode.ErrnoENOENT {
			t.Fatalf("err = %v, want ENOENT", err)
		}
		if hidden != "" && strings.Contains(err.Error(), hidden) {
			t.Fatalf("the error names the denied %s: %v", hidden, err)
		}
		if !strings.Contains(err.Error(), shown) {
			t.Fatalf("the error does not suggest %s: %v", shown, err)
		}
	}
	t.Run("without a deny it is suggested", func(t *testing.T) {
		_, _, err := doRead(bg, &ReadArgs{Path: filepath.Join(cfg, "id_rsa_pro")})
		missing(t, err, "id_rsa_prod", "")
	})
	t.Run("read", func(t *testing.T) {
		_, _, err := doRead(bg, &ReadArgs{Path: filepath.Join(cfg, "id_rsa_pro"), Deny: deny})
		missing(t, err, "id_rsa_pro.pub", "id_rsa_prod")
	})
	t.Run("read decided", func(t *testing.T) {
		p := filepath.Join(cfg, "id_rsa_pro")
		_, _, err := doRead(bg, &ReadArgs{Path: p, Deny: deny, Decided: &Resolved{Resolved: p}})
		missing(t, err, "id_rsa_pro.pub", "id_rsa_prod")
	})
	t.Run("read through a symlinked directory", func(t *testing.T) {
		_, _, err := doRead(bg, &ReadArgs{Path: filepath.Join(link, "id_rsa_pro"), Deny: deny})
		missing(t, err, "id_rsa_pro.pub", "id_rsa_prod")
	})
	t.Run("grep decided", func(t *testing.T) {
		p := filepath.Join(cfg, "id_rsa_pro")
		_, _, err := doGrep(bg, &GrepArgs{Args: []string{"-e", "k", "--", p}, Path: p, Deny: deny, Decided: &Resolved{Resolved: p}})
		missing(t, err, "id_rsa_pro.pub", "id_rsa_prod")
	})
}
