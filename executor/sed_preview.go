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

// sedPreview computes what an approved `sed -i` writes: for each file, the same sed without
// -i, run confined, read-only, as the session owner, on the current file, its stdout the new
// content; with a backup suffix, the backup (the current content) before each file. Approving
// then writes exactly those (applyPreviews, refused if any file's digest changed) instead of
// running the command again. The shape with a preview: one simple command
// `sed -i[SUFFIX] [OPTION|SCRIPT]... FILE...` of static words, each file named once, no
// redirection; anything else runs as the command when approved, as before.
func (p *Pipeline) sedPreview(ctx context.Context, c *Call) ([]protocol.Preview, [][]byte, error) {
	cl := c.Classification()
	if cl == nil || len(cl.Subcommands) != 1 || cl.PathsIncomplete {
		return nil, nil, errNoPreview
	}
	// Only a script that edits and does nothing else: the preview runs it before anyone has
	// approved it, and a script's e command runs a program, r reads another file into the
	// output, w writes one (the classifier reports those before sed_in_place).
	sub := cl.Subcommands[0]
	argv := sub.Argv
	if len(argv) < 3 || argv[0] != "sed" || sub.Reason != classifier.ReasonSedInPlace || strings.ContainsAny(sub.Text, "<>|&;") {
		return nil, nil, errNoPreview
	}
	opts, files, suffix, ok := sedInPlace(argv[1:])
	if !ok {
		return nil, nil, errNoPreview
	}
	var writes []string
	seen := map[string]bool{}
	for _, pu := range cl.Paths {
		if pu.Access != classifier.AccessWrite {
			continue
		}
		if pu.Cmd != "sed" || seen[pu.Path] {
			return nil, nil, errNoPreview // another write, or a file named twice (edited twice)
		}
		seen[pu.Path] = true
		writes = append(writes, pu.Path)
	}
	// The writes are the files and, with a suffix, their backups (FILE+suffix, made from
	// what each file held, previewed below).
	var targets []string
	for _, w := range writes {
		if base, isBackup := strings.CutSuffix(w, suffix); suffix == "" || !isBackup || !seen[base] {
			targets = append(targets, w)
		}
	}
	if len(targets) == 0 || len(files) != len(targets) || suffix != "" && len(writes) != 2*len(targets) {
		return nil, nil, errNoPreview
	}
	var pvs []protocol.Preview
	var contents [][]byte
	for _, target := range targets {
		if c.decidedWriteOf(target) == "" || suffix != "" && c.decidedWriteOf(target+suffix) == "" {
			return nil, nil, errNoPreview // nowhere decided for an approved write to go
		}
		cur, next, err := p.sedOne(ctx, c, opts, target)
		if err != nil {
			return nil, nil, err
		}
		if suffix != "" {
			bak := target + suffix
			old, err := p.host.ReadFileAs(ctx, c.Session, bak, confinedOutputLimit-1)
			if err != nil && errcode.Of(err) != errcode.ErrnoENOENT {
				return nil, nil, err
			}
			pvs = append(pvs, newPreview(bak, c.decidedWriteOf(bak), old, err == nil, cur))
			contents = append(contents, cur)
		}
		pvs = append(pvs, newPreview(target, c.decidedWriteOf(target), cur, true, next))
		contents = append(contents, next)
	}
	return pvs, contents, nil
}

// sedOne runs `sed OPTS -- target` confined and read-only, and returns target's content
// before and sed's output: what sed -i would write there.
func (p *Pipeline) sedOne(ctx context.Context, c *Call, opts []string, target string) (cur, next []byte, err error) {
	read := func() ([]byte, error) {
		return p.host.ReadFileAs(ctx, c.Session, target, confinedOutputLimit-1)
	}
	if cur, err = read(); err != nil {
		return nil, nil, err
	}
	quoted := make([]string, 0, len(opts)+3)
	for _, a := range append(append([]string{"sed"}, opts...), "--", target) {
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
	return cur, res.stdout, nil
}

// sedInPlace splits sed -i's arguments into the options and script that stay (opts, in
// order), the files, and the backup suffix. ok is false when there is no -i, or when the
// preview could not be what sed -i does: a word sed would refuse, a suffix with `*` or `/`
// (sed makes a name or a directory of it), --follow-symlinks (sed would write the link's
// target, the preview is of the path), or --debug (it prints to stdout).
func sedInPlace(args []string) (opts, files []string, suffix string, ok bool) {
	a := classifier.ParseSedArgs(args)
	if a.InPlaceAt > len(args) || a.Bad <= len(args) || a.FollowSymlinks || a.Debug || strings.ContainsAny(a.Suffix, "*/") {
		return nil, nil, "", false
	}
	return a.Kept, a.Files, a.Suffix, true
}
