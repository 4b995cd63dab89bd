package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDenyRuleMeetsEachSpellingOfAName: a Read deny rule written with é as one letter (NFC)
// holds for the file whose name on disk spells it as e and a combining accent (NFD, as macOS
// writes names), and the other way round: in the decision of a Read by either name, in the
// kernel for a Bash glob, and in Grep's search.
func TestDenyRuleMeetsEachSpellingOfAName(t *testing.T) {
	td := startDaemon(t, "")
	dir := testHostDir(t)
	for _, tc := range []struct{ rule, disk string }{
		{"caf\u00e9.txt", "cafe\u0301.txt"},
		{"the\u0301.txt", "th\u00e9.txt"},
		// In no normal form: ê composed with a combining dot below after it, and the marks
		// in reverse order, for ệ.
		{"x\u1ec7y.txt", "x\u00ea\u0323y.txt"},
		{"x\u1ec7y.txt", "xe\u0302\u0323y.txt"},
	} {
		if err := os.WriteFile(filepath.Join(dir, tc.disk), []byte("TOPSECRET\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Read(./%s)"]}}`, dir, tc.rule))
		for _, name := range []string{tc.rule, tc.disk} {
			_, res := td.call(t, s.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(dir, name)))
			if len(res.Content) > 0 && strings.Contains(res.Content[0].Text, "TOPSECRET") || !res.IsError {
				t.Errorf("Read %q under a deny of %q: %+v", name, tc.rule, res)
			}
		}
		_, res := td.call(t, s.ID, "Bash", `{"command":"cat *.txt; cat ./th* ./caf* ./x*"}`)
		if out, _ := res.Data["stdout"].(string); strings.Contains(out, "TOPSECRET") {
			t.Errorf("cat read %q under a deny of %q: %q", tc.disk, tc.rule, out)
		}
		_, res = td.call(t, s.ID, "Grep", fmt.Sprintf(`{"pattern":"TOPSECRET","path":%q,"output_mode":"content"}`, dir))
		if len(res.Content) > 0 && strings.Contains(res.Content[0].Text, "TOPSECRET") {
			t.Errorf("Grep printed %q under a deny of %q: %+v", tc.disk, tc.rule, res)
		}
		os.Remove(filepath.Join(dir, tc.disk))
	}
	// An Edit deny holds the same way.
	disk := filepath.Join(dir, "x\u00ea\u0323z.txt")
	if err := os.WriteFile(disk, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","rules":{"deny":["Edit(./x\u1ec7z.txt)"]}}`, dir))
	td.call(t, s.ID, "Bash", `{"command":"for f in ./x*z.txt; do echo changed > \"$f\"; done"}`)
	if b, err := os.ReadFile(disk); err != nil || string(b) != "keep\n" {
		t.Errorf("a Bash write changed the file an Edit deny names in another form: %q %v", b, err)
	}
}
