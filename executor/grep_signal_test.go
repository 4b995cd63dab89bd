package executor

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/worker"
)

// TestGrepOOMIsAnError: an rg the out-of-memory killer ends (a line longer than the sandbox's
// memory, which rg holds whole) makes Grep an error saying the search was cut short by running
// out of memory, never "No matches found" with no error.
func TestGrepOOMIsAnError(t *testing.T) {
	e := newToolEnvCfg(t, config.Sandbox{MemoryMaxBytes: 48 << 20})
	f, err := os.Create(filepath.Join(e.dir, "one-line.txt"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("a"), 1<<20)
	for range 160 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	os.Chown(f.Name(), nobody, nobody)
	res, err := e.call(t, "Grep", Input{"pattern": "needle", "output_mode": "content"})
	if err == nil {
		t.Fatalf("Grep answered %q (is_error %v), want an error", text(res), res.IsError)
	}
	switch {
	case strings.Contains(err.Error(), "file worker exited"):
		// The kernel's OOM killer may pick the worker rather than its rg (they share the
		// cgroup, and a worker built with -race is the larger): the search failed all the
		// same, which is what this test holds to.
		t.Logf("the worker itself was killed: %v", err)
	case errcode.Of(err) != errcode.OOM || !strings.Contains(err.Error(), "cut short") || !strings.Contains(err.Error(), "out of memory"):
		t.Errorf("err = %v (code %s), want %s saying the search was cut short for want of memory", err, errcode.Of(err), errcode.OOM)
	}
	// The worker survives its rg: the next search answers.
	e.file(t, "small.txt", "needle\n")
	if res := e.mustCall(t, "Grep", Input{"pattern": "needle", "glob": "small.txt", "output_mode": "files_with_matches"}); !strings.Contains(text(res), "small.txt") {
		t.Errorf("after the OOM: %q", text(res))
	}
}

// TestGrepCutShort: every way rg can end without exiting by itself is an error that says so
// and why, and none is "no matches".
func TestGrepCutShort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		reply worker.GrepReply
		code  errcode.Code
		want  string
	}{
		{"oom", worker.GrepReply{ExitCode: -1, Signal: "SIGKILL", OOMKilled: true}, errcode.OOM, "killed for running out of memory"},
		{"killed", worker.GrepReply{ExitCode: -1, Signal: "SIGKILL"}, errcode.ToolFailed, "killed by SIGKILL"},
		{"segv", worker.GrepReply{ExitCode: -1, Signal: "SIGSEGV"}, errcode.ToolFailed, "killed by SIGSEGV"},
		{"no status", worker.GrepReply{ExitCode: -1}, errcode.ToolFailed, "without an exit status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := grepCutShort(&tc.reply)
			if errcode.Of(err) != tc.code || !strings.Contains(err.Error(), "Grep was cut short") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v (code %s), want %s naming %q", err, errcode.Of(err), tc.code, tc.want)
			}
			if strings.Contains(err.Error(), "No matches") {
				t.Errorf("%v", err)
			}
		})
	}
}
