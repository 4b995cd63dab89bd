package executor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestGlobHonoursReadDenies: an absolute Glob pattern is checked as a read of where it
// walks, and no name under a denied path is listed, however the pattern reaches it.
func TestGlobHonoursReadDenies(t *testing.T) {
	out := outsideDir(t)
	writeFile(t, out+"/secret/id_rsa", "k")
	writeFile(t, out+"/secret/sub/token", "k")
	writeFile(t, out+"/public/readme", "k")
	e := newDecideEnv(t, "Read(/"+out+"/secret)", "Read(.env)")
	e.file(t, "src/a.go", "x")
	e.file(t, ".env", "x")
	e.file(t, "sub/.env", "x")

	for _, pattern := range []string{out + "/secret/**", out + "/secret/*", out + "/{public,secret}/**", out + "/*/id_rsa", out + "/**"} {
		t.Run(pattern, func(t *testing.T) {
			d, r, err := e.decide(t, "Glob", Input{"pattern": pattern})
			if d.Behavior == permission.Allow && (err != nil || strings.Contains(text(r), "/secret")) {
				t.Fatalf("listed a denied dir: %q %v", text(r), err)
			}
			if strings.HasPrefix(pattern, out+"/secret") && d.Behavior == permission.Allow {
				t.Fatalf("decision %s (%s): the pattern's directory was not checked", d.Behavior, d.Reason)
			}
			// Whatever the decision, the run itself lists nothing denied.
			c, _ := e.decideOnly(t, "Glob", Input{"pattern": pattern})
			r, err = c.Tool.Call(context.Background(), c, nil)
			if err != nil || strings.Contains(text(r), "/secret") {
				t.Fatalf("run listed a denied dir: %q %v", text(r), err)
			}
		})
	}
	t.Run("in the workspace", func(t *testing.T) {
		d, r, err := e.decide(t, "Glob", Input{"pattern": "**/*"})
		if d.Behavior != permission.Allow || err != nil || strings.Contains(text(r), ".env") || !strings.Contains(text(r), "src/a.go") {
			t.Fatalf("decision %s (%s); result %q %v", d.Behavior, d.Reason, text(r), err)
		}
	})
}

// TestGrepHonoursReadDenies: with Read(.env) denied, a Grep over the workspace never prints
// a denied file's name or content, in any output mode, whatever its globs say.
func TestGrepHonoursReadDenies(t *testing.T) {
	e := newDecideEnv(t, "Read(.env)", "Read(keys/**)")
	e.file(t, ".env", "TOKEN=hunter2\n")
	e.file(t, "app/.env", "TOKEN=hunter2\n")
	e.file(t, "keys/k.pem", "hunter2\n")
	e.file(t, "a.txt", "hunter2 is not a secret here\n")
	for _, in := range []Input{
		{"pattern": "hunter2"},
		{"pattern": "hunter2", "output_mode": "content"},
		{"pattern": "hunter2", "output_mode": "content", "-C": 2},
		{"pattern": "hunter2", "output_mode": "count"},
		{"pattern": "hunter2", "output_mode": "content", "glob": "*.env"},
		{"pattern": "hunter2", "output_mode": "content", "glob": "**/keys/**", "path": e.dir},
	} {
		t.Run(strings.TrimSpace(in.String("output_mode")+" "+in.String("glob")), func(t *testing.T) {
			d, r, err := e.decide(t, "Grep", in)
			if d.Behavior != permission.Allow || err != nil {
				t.Fatalf("decision %s (%s): %v", d.Behavior, d.Reason, err)
			}
			got := text(r)
			if strings.Contains(got, ".env") || strings.Contains(got, "TOKEN=") || strings.Contains(got, "k.pem") {
				t.Fatalf("printed a denied file: %q", got)
			}
			if in.String("glob") == "" && !strings.Contains(got, "a.txt") {
				t.Fatalf("allowed file missing: %q", got)
			}
		})
	}
	t.Run("the denied file itself", func(t *testing.T) {
		d, r, _ := e.decide(t, "Grep", Input{"pattern": "hunter2", "path": filepath.Join(e.dir, ".env"), "output_mode": "content"})
		if d.Behavior == permission.Allow || strings.Contains(text(r), "hunter2") {
			t.Fatalf("decision %s (%s); result %q", d.Behavior, d.Reason, text(r))
		}
	})
}
