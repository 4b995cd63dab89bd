package executor

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/protocol"
)

// sedPreview computes what an approved `sed -i` writes: the same sed without -i, run
// confined, read-only, as the session owner, on the current file, its stdout the new content.
// Approving then writes exactly that (applyPreview, refused if the file's digest changed)
// instead of running the command again. Only the plain shape has a preview: one simple
// command `sed -i [OPTION|SCRIPT]... FILE` of static words, one file, no backup suffix, no
// redirection; anything else runs as the command when approved, as before.
func (p *Pipeline) sedPreview(ctx context.Context, c *Call) (*protocol.Preview, []byte, error) {
	cl := c.Classification()
	if cl == nil || len(cl.Subcommands) != 1 || cl.PathsIncomplete {
		return nil, nil, errNoPreview
	}
	argv := cl.Subcommands[0].Argv
	if len(argv) < 3 || argv[0] != "sed" || strings.ContainsAny(cl.Subcommands[0].Text, "<>|&;") {
		return nil, nil, errNoPreview
	}
	var target string
	for _, pu := range cl.Paths {
		if pu.Access != classifier.AccessWrite {
			continue
		}
		if pu.Cmd != "sed" || target != "" {
			return nil, nil, errNoPreview // another write, or more than one file
		}
		target = pu.Path
	}
	if target == "" {
		return nil, nil, errNoPreview
	}
	args, ok := withoutInPlace(argv[1:])
	if !ok {
		return nil, nil, errNoPreview
	}
	read := func() ([]byte, error) {
		return p.host.ReadFileAs(ctx, c.Session, target, confinedOutputLimit-1)
	}
	cur, err := read()
	if err != nil {
		return nil, nil, err
	}
	quoted := make([]string, 0, len(args)+1)
	for _, a := range append([]string{"sed"}, args...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	res, err := p.host.runConfined(ctx, c.Session, true, "sed-preview", strings.Join(quoted, " "), nil)
	switch {
	case err != nil:
		return nil, nil, err
	case res.timedOut || res.exitCode != 0 || len(res.stdout) >= confinedOutputLimit:
		return nil, nil, errcode.New(errcode.Validation, fmt.Errorf("%w: sed without -i exited %d", errNoPreview, res.exitCode))
	}
	// The file read before and after the run must agree: the preview is of one version.
	again, err := read()
	if err != nil || !bytes.Equal(cur, again) {
		return nil, nil, errNoPreview
	}
	next := res.stdout
	return &protocol.Preview{Path: target, Exists: true, SHA256: sha256hex(cur),
		NewSHA256: sha256hex(next), Diff: UnifiedDiff(target, string(cur), string(next), true)}, next, nil
}

// withoutInPlace drops sed's -i/--in-place from args; false when there is none, or when the
// preview could not be what sed -i does: a backup suffix (-i.bak: approving writes no
// backup), -i inside a cluster of short options (-ni), --follow-symlinks (sed would write the
// link's target, the preview is of the path).
func withoutInPlace(args []string) ([]string, bool) {
	out := make([]string, 0, len(args))
	seen := false
	for i, a := range args {
		switch {
		case a == "--":
			out = append(out, args[i:]...)
			return out, seen
		case a == "-i" || a == "--in-place":
			seen = true
			continue
		case strings.HasPrefix(a, "--in-place=") || strings.HasPrefix(a, "-i"):
			return nil, false // a backup suffix
		case a == "--follow-symlinks":
			return nil, false
		case strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsRune(a[1:], 'i') && a != "-e" && a != "-f":
			return nil, false // -ni, -Ei: -i in a cluster
		}
		out = append(out, a)
	}
	return out, seen
}
