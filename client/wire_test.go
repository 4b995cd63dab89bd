package client

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/config"
)

func TestDefaultSocket(t *testing.T) {
	t.Parallel()
	if DefaultSocket != config.DefaultSocket {
		t.Errorf("DefaultSocket %q, config's %q", DefaultSocket, config.DefaultSocket)
	}
}

// The client stays light: besides the standard library it imports only protocol, and protocol
// only the standard library (never api/ and the daemon behind it), or their package init would
// run on every sbctl start.
func TestImportsStayLight(t *testing.T) {
	t.Parallel()
	for dir, allowed := range map[string]string{".": "github.com/sandboxd/sandboxd/protocol", "../protocol": ""} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") && path != allowed {
					t.Errorf("%s imports %s: only the standard library%s", name, path, map[bool]string{true: " and protocol", false: ""}[allowed != ""])
				}
			}
		}
	}
}
