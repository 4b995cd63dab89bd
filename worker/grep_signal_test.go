package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestGrepReportsSignalDeath: an rg that dies of a signal the worker did not send (the OOM
// killer's SIGKILL in its cgroup) is reported as such, never as an exit 0 or 1 that reads as
// "no matches"; one that exits by itself is reported by its status.
func TestGrepReportsSignalDeath(t *testing.T) {
	bin := t.TempDir()
	for name, script := range map[string]string{
		"killed": "#!/bin/sh\nkill -KILL $$\n",
		"segv":   "#!/bin/sh\nkill -SEGV $$\n",
		"none":   "#!/bin/sh\nexit 1\n",
	} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		script string
		code   int
		signal string
	}{
		{"killed", -1, "SIGKILL"},
		{"segv", -1, "SIGSEGV"},
		{"none", 1, ""},
	} {
		t.Run(tc.script, func(t *testing.T) {
			dir := filepath.Join(bin, tc.script+".d")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(bin, tc.script), filepath.Join(dir, "rg")); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir)
			d := t.TempDir()
			r, _, err := doGrep(context.Background(), &GrepArgs{Args: []string{"-e", "x", "--", d}, Dir: d, Path: d})
			if err != nil {
				t.Fatal(err)
			}
			if r.ExitCode != tc.code || r.Signal != tc.signal || r.OOMKilled {
				t.Errorf("reply %+v, want exit %d, signal %q, not OOM", r, tc.code, tc.signal)
			}
		})
	}
}
