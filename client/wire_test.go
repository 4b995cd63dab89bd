package client

import (
	"go/parser"
	"go/token"
	"os"
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

// The client stays light: besides the standard library it imports only protocol (itself a
// leaf of the standard library), never api/ and the daemon behind it.
func TestImportsStayLight(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && path != "github.com/sandboxd/sandboxd/protocol" {
				t.Errorf("%s imports %s: the client may import only the standard library and protocol", name, path)
			}
		}
	}
}
