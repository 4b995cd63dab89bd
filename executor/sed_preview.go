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
	argv := cl.Subcommands[0].Argv
	if len(argv) < 3 || argv[0] != "sed" || strings.ContainsAny(cl.Subcommands[0].Text, "<>|&;") {
		return nil, nil, errNoPreview
	}
	var targets []string
	seen := map[string]bool{}
	for _, pu := range cl.Paths {
		if pu.Access != classifier.AccessWrite {
			continue
		}
		if pu.Cmd != "sed" || seen[pu.Path] {
			return nil, nil, errNoPreview // another write, or a file named twice (edited twice)
		}
		seen[pu.Path] = true
		targets = append(targets, pu.Path)
	}
	opts, files, suffix, ok := sedInPlace(argv[1:])
	if !ok || len(targets) == 0 || len(files) != len(targets) {
		return nil, nil, errNoPreview
	}
	var pvs []protocol.Preview
	var contents [][]byte
	for _, target := range targets {
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
			pvs = append(pvs, newPreview(bak, old, err == nil, cur))
			contents = append(contents, cur)
		}
		pvs = append(pvs, newPreview(target, cur, true, next))
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
// preview could not be what sed -i does: a suffix with `*` or `/` (sed makes a name or a
// directory of it), --follow-symlinks (sed would write the link's target, the preview is of
// the path), --debug (it prints to stdout), or an option it does not know.
func sedInPlace(args []string) (opts, files []string, suffix string, ok bool) {
	inPlace, script := false, false
	var operands []string
	// value appends an option's argument: the rest of its word, or the next word.
	value := func(i *int, rest string) bool {
		if rest != "" {
			return true
		}
		if *i+1 >= len(args) {
			return false
		}
		*i++
		opts = append(opts, args[*i])
		return true
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, val, has := strings.Cut(a[2:], "=")
			switch {
			case name == "":
				return nil, nil, "", false
			case longIs(name, "in-place"):
				inPlace, suffix = true, val
				continue
			case longIs(name, "expression"), longIs(name, "file"), longIs(name, "line-length"):
				opts = append(opts, a)
				script = script || !longIs(name, "line-length")
				if !has && !value(&i, "") {
					return nil, nil, "", false
				}
				continue
			case longIs(name, "quiet"), longIs(name, "silent"), longIs(name, "null-data"),
				longIs(name, "zero-terminated"), longIs(name, "regexp-extended"), longIs(name, "separate"),
				longIs(name, "unbuffered"), longIs(name, "posix"), longIs(name, "sandbox"), longIs(name, "binary"):
				opts = append(opts, a)
			default:
				return nil, nil, "", false
			}
		case len(a) > 1 && a[0] == '-':
			if !sedShortOptions(a, &i, &opts, &suffix, &inPlace, &script, value) {
				return nil, nil, "", false
			}
		default:
			operands = append(operands, a)
		}
	}
	if !script {
		if len(operands) == 0 {
			return nil, nil, "", false
		}
		opts, operands = append(opts, operands[0]), operands[1:]
	}
	if !inPlace || strings.ContainsAny(suffix, "*/") {
		return nil, nil, "", false
	}
	return opts, operands, suffix, true
}

// sedShortOptions reads one word of short options. -i takes the rest of the word as its
// suffix, as GNU sed does (-in is -i with suffix "n"); -e, -f and -l take the rest of the
// word or the next one.
func sedShortOptions(a string, i *int, opts *[]string, suffix *string, inPlace, script *bool, value func(*int, string) bool) bool {
	for j := 1; j < len(a); j++ {
		switch a[j] {
		case 'n', 'E', 'r', 's', 'u', 'z', 'b':
		case 'i':
			if j > 1 {
				*opts = append(*opts, a[:j])
			}
			*inPlace, *suffix = true, a[j+1:]
			return true
		case 'e', 'f', 'l':
			*opts = append(*opts, a)
			*script = *script || a[j] != 'l'
			return value(i, a[j+1:])
		default:
			return false
		}
	}
	*opts = append(*opts, a)
	return true
}

// longIs reports whether name abbreviates the long option full, as getopt accepts.
func longIs(name, full string) bool {
	return name != "" && strings.HasPrefix(full, name)
}
