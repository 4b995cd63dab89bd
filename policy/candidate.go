package policy

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	bundleapi "github.com/open-policy-agent/opa/v1/bundle"
)

// The module name prefixes of the policy's sources: the embedded policy, a bundle's modules
// (custom, or the whole policy) and, without a prefix, a policy directory's files.
const (
	embeddedPrefix   = "embedded:"
	bundlePrefix     = "bundle:"
	bundleFullPrefix = "bundlefull:"
)

// EmbeddedModules is the policy this binary carries, by module name, without its tests.
func EmbeddedModules() (map[string]string, error) { return embeddedModules(false) }

// IsEmbedded reports whether a module name (Modules, EmbeddedModules) is the embedded policy's.
func IsEmbedded(name string) bool { return strings.HasPrefix(name, embeddedPrefix) }

// DirModules reads a policy directory's *.rego as policy_dir would, without the ownership
// check: for a candidate policy read by its author, never for what the daemon enforces.
func DirModules(ctx context.Context, dir string) (map[string]string, error) {
	return dirModules(ctx, dir, false, false)
}

// BundleModules reads an OPA bundle (tar.gz) and returns its modules, named as the engine
// names an activated bundle's; full is true when the bundle carries the whole policy (it
// defines package sandboxd.main), which then replaces the embedded one.
func BundleModules(r io.Reader) (mods map[string]string, full bool, err error) {
	b, err := bundleapi.NewReader(r).WithRegoVersion(ast.RegoV1).Read()
	if err != nil {
		return nil, false, fmt.Errorf("read bundle: %w", err)
	}
	mainPkg := ast.MustParseRef("data.sandboxd.main")
	for _, m := range b.Modules {
		if m.Parsed != nil && m.Parsed.Package.Path.Equal(mainPkg) {
			full = true
		}
	}
	prefix := bundlePrefix
	if full {
		prefix = bundleFullPrefix
	}
	mods = make(map[string]string, len(b.Modules))
	for _, m := range b.Modules {
		if !strings.HasSuffix(m.Path, "_test.rego") {
			mods[prefix+m.Path] = string(m.Raw)
		}
	}
	return mods, full, nil
}
