package classifier

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// FuzzClassify checks that Classify never panics or hangs on arbitrary
// bytes and that read-only implies parsed with every subcommand read-only.
func FuzzClassify(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.cmd)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		if len(cmd) > maxParseLen+16 {
			t.Skip("beyond the parse bound")
		}
		start := time.Now()
		c := Classify(cmd, testOpts)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("classify took %v", d)
		}
		if c.Reason == "internal_error" {
			t.Fatalf("internal error (recovered panic) on %q", cmd)
		}
		checkInvariants(t, cmd, c)
		// The hosts the line names are read from the same words, whatever they hold.
		_ = NamedHosts(c)
		// The session's dirs feed paths and risks, never ReadOnly: the pipeline takes a
		// call's ReadOnly from its classification with them and reads it nowhere else.
		// Outside any sandbox, mentions only add paths: every fact of the same line read for
		// sandboxd is there too, unless the list ran out of room.
		un := testOpts
		un.Unconfined = true
		if other := Classify(cmd, un); !other.PathsIncomplete || !c.PathsIncomplete {
			for _, p := range c.Paths {
				if !other.PathsIncomplete && !slices.ContainsFunc(other.Paths, func(q PathUse) bool { return q == p }) {
					t.Fatalf("%q: %+v read for sandboxd is not among its paths outside any sandbox %+v", cmd, p, other.Paths)
				}
			}
		}
		// The one reading the dirs change is a cd to the cwd as it is named (cdStays), and
		// without a cwd a line is never read-only where it is not with one: the tool's
		// IsReadOnly reads it with none, and may only refuse more.
		for _, o := range []Options{{}, {Cwd: "/", Home: "/root", WorkDirs: []string{"/srv", "/tmp"}}, {Unconfined: true}} {
			other := Classify(cmd, o)
			if other.ReadOnly == c.ReadOnly || (o.Cwd != "" || !other.ReadOnly) && strings.Contains(cmd, "cd") {
				continue
			}
			t.Fatalf("%q: read-only %v with the test dirs, %v with %+v (%s / %s)", cmd, c.ReadOnly, other.ReadOnly, o, c.Reason, other.Reason)
		}
		if c.ReadOnly && badChar(cmd) != "" {
			t.Fatalf("read-only with a control character: %q", cmd)
		}
		for _, s := range c.Subcommands {
			_ = MatchRule("git *", s.Prefix)
			_ = MatchRule("*", s.DenyPrefix)
		}
	})
}

// FuzzClassifyDialects: reading a command for zsh or sh only ever refuses more than reading
// it for bash (each dialect is bash's reading plus refusals), never panics, and a refusal
// for a dialect alone is a parse error, so no allow rule can match it.
func FuzzClassifyDialects(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add(c.cmd, uint8(1))
	}
	f.Add("ls *(e:'touch x':)", uint8(1))
	f.Add("echo $'a\\' ; touch x ; # '", uint8(2))
	f.Fuzz(func(t *testing.T, cmd string, which uint8) {
		if len(cmd) > maxParseLen+16 {
			t.Skip("beyond the parse bound")
		}
		shell := []string{ShellBash, ShellZsh, ShellSh, "fish"}[which%4]
		opts := testOpts
		opts.Shell = shell
		c := Classify(cmd, opts)
		if c.Reason == "internal_error" {
			t.Fatalf("internal error (recovered panic) on %q for %s", cmd, shell)
		}
		checkInvariants(t, cmd, c)
		bash := Classify(cmd, testOpts)
		if c.ReadOnly && !bash.ReadOnly {
			t.Fatalf("%q is read-only for %s but not for bash (%s)", cmd, shell, bash.Reason)
		}
		if bash.ReadOnly && !c.ReadOnly && (c.Reason == reasonZsh || c.Reason == reasonSh || c.Reason == reasonUnknownShell) && c.ParseError == nil {
			t.Fatalf("%q refused for %s without a parse error", cmd, shell)
		}
	})
}
