package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryFuzzTargetRunsInCI: each Fuzz function in the module is listed in the Makefile's
// FUZZ_TARGETS (which `make test` runs briefly), so a new parser's fuzz target cannot be left
// out of CI by forgetting a line.
func TestEveryFuzzTargetRunsInCI(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(\./[\w/]+):(Fuzz\w+):\d+`).FindAllStringSubmatch(string(mk), -1) {
		listed[m[1]+":"+m[2]] = true
	}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
	found := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			found++
			if key := "./" + filepath.ToSlash(rel) + ":" + m[1]; !listed[key] {
				t.Errorf("%s is not in the Makefile's FUZZ_TARGETS", key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 || len(listed) == 0 {
		t.Fatalf("found %d fuzz targets and %d listed: the patterns no longer match", found, len(listed))
	}
}
