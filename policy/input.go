package policy

import (
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
)

// The input is built as an ast.Value directly: converting a map[string]any through OPA's
// generic path (JSON round trip) costs more than the whole evaluation.

// rulesValues caches each RuleSet's rule data as an AST value, keyed by its digest: a session
// reuses one RuleSet for many calls, so the conversion is paid once per rules change. The cache
// is the daemon's, and a user may make and end sessions of a thousand rules in a loop (each
// value about 350 bytes a rule): it is bounded by the bytes its values hold, not only their
// count, or it kept hundreds of MB of rule sets no session had any more.
type rulesValues struct {
	once  sync.Once
	lru   *lru.Cache[string, sizedValue]
	bytes atomic.Int64 // what the cached values hold, by valueBytes
}

type sizedValue struct {
	v    ast.Value
	size int64
}

const (
	rulesValuesMax      = 1024
	rulesValuesMaxBytes = 64 << 20
)

// valueBytes estimates what rs's AST value holds: about 350 bytes a rule (measured) and its
// text several times over.
func valueBytes(rs *permission.RuleSet) int64 {
	n := int64(0)
	for _, r := range rs.Rules() {
		n += 400 + 4*int64(len(r.Tool)+len(r.Content)+len(r.Origin)+len(r.Pattern))
	}
	return n
}

func (c *rulesValues) get(rs *permission.RuleSet) (ast.Value, error) {
	c.once.Do(func() {
		c.lru, _ = lru.NewWithEvict(rulesValuesMax, func(_ string, sv sizedValue) { c.bytes.Add(-sv.size) })
	})
	d := rs.Digest()
	if sv, ok := c.lru.Get(d); ok {
		return sv.v, nil
	}
	v, err := ast.InterfaceToValue(rs.Data())
	if err != nil {
		return nil, err
	}
	size := valueBytes(rs)
	if size > rulesValuesMaxBytes/8 {
		return v, nil // converted for this call only: one such set would crowd out the rest
	}
	if found, _ := c.lru.ContainsOrAdd(d, sizedValue{v: v, size: size}); !found {
		c.bytes.Add(size)
	}
	for c.bytes.Load() > rulesValuesMaxBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
	return v, nil
}

// Input building allocates on every call and the garbage collector's assist time showed up as
// the largest single cost in profiles, so object keys and common values are shared terms
// (ground terms are never mutated by the evaluator; OPA interns the same way).
var keyTerms = func() map[string]*ast.Term {
	m := map[string]*ast.Term{}
	for _, k := range []string{
		"tool", "input", "mode", "caller", "uid", "gid", "user", "cwd", "home", "workdirs", "read_only",
		"paths", "requested", "resolved", "access", "special", "alternative", "bash", "command_words", "domain", "hook",
		"decision", "reason", "requires_user_interaction", "rules", "text", "argv", "prefix", "deny_prefix",
		"match_words", "exact_only", "redirects", "op", "target", "write", "parse_error", "subcommands", "risks",
		"read_paths", "write_paths", "path_subjects", "redirect_subjects", "tree_subjects", "deny_words", "opaque", "nested",
		"allowed_domain", "cache_dirs", "http", "method", "path", "paths_incomplete", "paths_unbounded", "redirects_incomplete", "git_objects_unseen", "unconfined",
		"Bash", "Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit", "MultiEdit", "WebFetch",
		string(permission.Read), string(permission.Write),
	} {
		m[k] = ast.StringTerm(k)
	}
	for _, md := range permission.Modes {
		m[string(md)] = ast.StringTerm(string(md))
	}
	return m
}()

var (
	emptyArray   = ast.ArrayTerm()
	emptyString  = ast.StringTerm("")
	writeBuckets = ast.ArrayTerm(ast.StringTerm("write"))
	anyBuckets   = ast.ArrayTerm(ast.StringTerm("write"), ast.StringTerm("read"))
)

func str(s string) *ast.Term {
	if s == "" {
		return emptyString
	}
	if t, ok := keyTerms[s]; ok {
		return t
	}
	return ast.StringTerm(s)
}

func strs(ss []string) *ast.Term {
	if ss == nil {
		return ast.NullTerm()
	}
	if len(ss) == 0 {
		return emptyArray
	}
	ts := make([]*ast.Term, len(ss))
	for i, s := range ss {
		ts[i] = str(s)
	}
	return ast.ArrayTerm(ts...)
}

// wordTerms builds word-list terms, reusing the previous one when the classifier gave the same
// words again (argv, prefix, deny_prefix and match_words are usually one slice).
type wordTerms struct {
	last []string
	term *ast.Term
}

func (w *wordTerms) get(ss []string) *ast.Term {
	if ss != nil && w.last != nil && slices.Equal(ss, w.last) {
		return w.term
	}
	w.last, w.term = ss, strs(ss)
	return w.term
}

func item(k string, v *ast.Term) [2]*ast.Term { return ast.Item(str(k), v) }

// buildInput turns facts and rule data into the policy input. Its JSON shape is documented
// in the package README (InputSchema) and is what custom Rego sees.
//
// extraDirs are the settings' additionalDirectories (RuleSet.Effective), added to the session's
// directories here so a caller cannot forget them.
func buildInput(f *permission.Facts, rules ast.Value, extraDirs ...string) (ast.Value, error) {
	toolInput := ast.NewObject()
	if f.Input != nil {
		v, err := ast.InterfaceToValue(f.Input)
		if err != nil {
			return nil, err
		}
		if o, ok := v.(ast.Object); ok {
			toolInput = o
		}
	}
	workdirs := make([]string, 0, 1+len(f.Dirs)+len(extraDirs))
	for _, d := range append(append([]string{f.Cwd}, f.Dirs...), extraDirs...) {
		if d != "" && path.IsAbs(d) {
			workdirs = append(workdirs, path.Clean(d))
		}
	}
	paths := make([]*ast.Term, len(f.Paths))
	var reads, writes, subjects, redirects, trees []*ast.Term
	for i, p := range f.Paths {
		req, res := str(p.Requested), str(p.Resolved)
		paths[i] = ast.ObjectTerm(
			item("requested", req),
			item("resolved", res),
			item("access", str(string(p.Access))),
			item("special", str(p.Special)),
			item("alternative", ast.InternedTerm(p.Alternative)),
		)
		// The rule buckets each path meets mirror permission.RuleSet's layout: reads meet
		// read rules and the tool's own (Glob/Grep) rules, writes meet write rules (where Read
		// denies are filed too), an access we do not know meets both (fail closed).
		var buckets *ast.Term
		switch p.Access {
		case permission.Read:
			// One of several places read, or the session's own results: no read outside by
			// itself.
			if !p.Alternative && !p.OwnResult {
				reads = append(reads, req, res)
			}
			buckets = ast.ArrayTerm(str("read"), str(f.Tool))
		case permission.Write:
			writes = append(writes, req, res)
			buckets = writeBuckets
		default:
			writes = append(writes, req, res)
			buckets = anyBuckets
		}
		names := []*ast.Term{req, res}
		for _, a := range p.Aliases {
			names = append(names, str(a))
		}
		for _, n := range names {
			subjects = append(subjects, ast.ArrayTerm(n, buckets))
			if p.Redirect {
				redirects = append(redirects, ast.ArrayTerm(n, buckets))
			}
			if p.Tree {
				trees = append(trees, ast.ArrayTerm(n, buckets))
			}
		}
	}
	hook := ast.NullTerm()
	if f.Hook != nil {
		hook = ast.ObjectTerm(item("decision", str(f.Hook.Decision)), item("reason", str(f.Hook.Reason)))
	}
	return ast.NewObject(
		item("tool", str(f.Tool)),
		item("input", ast.NewTerm(toolInput)),
		item("mode", str(string(f.Mode))),
		item("caller", ast.ObjectTerm(
			item("uid", ast.IntNumberTerm(int(f.Caller.UID))),
			item("gid", ast.IntNumberTerm(int(f.Caller.GID))),
			item("user", str(f.Caller.User)),
		)),
		item("cwd", str(f.Cwd)),
		item("home", str(f.Home)),
		item("workdirs", strs(workdirs)),
		item("read_only", ast.InternedTerm(f.ReadOnly)),
		item("paths", ast.ArrayTerm(paths...)),
		item("read_paths", ast.ArrayTerm(reads...)),
		item("write_paths", ast.ArrayTerm(writes...)),
		item("path_subjects", ast.ArrayTerm(subjects...)),
		item("redirect_subjects", ast.ArrayTerm(redirects...)),
		item("tree_subjects", ast.ArrayTerm(trees...)),
		item("bash", bashTerm(f.Bash)),
		item("command_words", strs(commandWords(f.Input))),
		item("deny_words", denyWords(f)),
		item("domain", str(f.Domain)),
		item("allowed_domain", str(f.AllowedDomain)),
		item("http", httpTerm(f.HTTP)),
		item("hook", hook),
		item("requires_user_interaction", ast.InternedTerm(f.RequiresUserInteraction)),
		item("unconfined", ast.InternedTerm(f.Unconfined)),
		item("cache_dirs", strs(f.CacheDirs)),
		item("rules", ast.NewTerm(rules)),
	), nil
}

// httpTerm is the request's method and path, or null for a tunnel and for other tools.
func httpTerm(h *permission.HTTPFact) *ast.Term {
	if h == nil {
		return ast.NullTerm()
	}
	return ast.ObjectTerm(item("method", str(h.Method)), item("path", str(h.Path)))
}

func bashTerm(c *classifier.Classification) *ast.Term {
	if c == nil {
		return ast.NullTerm()
	}
	subs := make([]*ast.Term, len(c.Subcommands))
	mw := make([]*ast.Term, len(c.Subcommands))
	opaque := false
	for i, s := range c.Subcommands {
		opaque = opaque || s.Opaque
		reds := emptyArray
		if len(s.Redirects) > 0 {
			rs := make([]*ast.Term, len(s.Redirects))
			for j, r := range s.Redirects {
				rs[j] = ast.ObjectTerm(item("op", str(r.Op)), item("target", str(r.Target)), item("write", ast.InternedTerm(r.Write)))
			}
			reds = ast.ArrayTerm(rs...)
		}
		var wt wordTerms
		mw[i] = wt.get(matchWords(s))
		subs[i] = ast.ObjectTerm(
			item("text", str(s.Text)),
			item("argv", wt.get(s.Argv)),
			item("read_only", ast.InternedTerm(s.ReadOnly)),
			item("reason", str(s.Reason)),
			item("prefix", wt.get(s.Prefix)),
			item("deny_prefix", wt.get(s.DenyPrefix)),
			item("match_words", wt.get(matchWords(s))),
			item("exact_only", ast.InternedTerm(s.ExactOnly)),
			item("redirect_only", ast.InternedTerm(s.RedirectOnly)),
			item("opaque", ast.InternedTerm(s.Opaque)),
			item("nested", ast.InternedTerm(s.Nested)),
			item("redirects", reds),
		)
	}
	pe := ast.NullTerm()
	if c.ParseError != nil {
		pe = str(*c.ParseError)
	}
	risks := strs(c.Risks)
	if c.Risks == nil {
		risks = ast.ArrayTerm()
	}
	return ast.ObjectTerm(
		item("read_only", ast.InternedTerm(c.ReadOnly)),
		item("reason", str(c.Reason)),
		// line_reason: why the line is not read-only whatever its commands are ("" for none).
		item("line_reason", str(c.LineReason)),
		item("parse_error", pe),
		item("subcommands", ast.ArrayTerm(subs...)),
		// match_words again, as one list: what deny and ask rules are compared with.
		item("match_words", ast.ArrayTerm(mw...)),
		item("risks", risks),
		// opaque: some command is known only at run time (see classifier.Subcommand.Opaque).
		item("opaque", ast.InternedTerm(opaque)),
		// paths_incomplete: some path a command reads or writes is known only at run time
		// ($HOME/x, a glob, a cd to a variable).
		item("paths_incomplete", ast.InternedTerm(c.PathsIncomplete)),
		// redirects_incomplete: some file a write redirection opens is known only at run time.
		item("redirects_incomplete", ast.InternedTerm(c.RedirectsIncomplete)),
		item("git_objects_unseen", ast.InternedTerm(c.GitObjectsUnseen)),
		// paths_unbounded: such a path may lie anywhere, not only under a directory the line
		// names ($HOME/x, $(...), ~user; a glob like *.go is incomplete but bounded).
		item("paths_unbounded", ast.InternedTerm(c.PathsUnbounded)),
	)
}

// matchWords are the words deny and ask rules see for one simple command (fail closed): past
// wrappers and every env assignment, else its static words, else its text split on spaces.
func matchWords(s classifier.Subcommand) []string {
	switch {
	case len(s.DenyPrefix) > 0:
		return s.DenyPrefix
	case len(s.Argv) > 0:
		return s.Argv
	}
	return nonNilFields(s.Text)
}

// denyWords are the word lists deny and ask rules see (fail closed): each simple command's
// match words when the command parsed, else the whitespace-split text; none for other tools.
func denyWords(f *permission.Facts) *ast.Term {
	if f.Tool != "Bash" {
		return emptyArray
	}
	if c := f.Bash; c != nil && c.ParseError == nil {
		ts := make([]*ast.Term, 0, len(c.Subcommands))
		for _, s := range c.Subcommands {
			w := matchWords(s)
			if s.DenyGlobs != nil && len(w) == len(s.DenyGlobs) {
				w = globMarked(w, s.DenyGlobs, s.DenyShapes)
			}
			ts = append(ts, strs(w))
			for _, v := range optionSkips(w) {
				ts = append(ts, strs(v))
			}
			if e := s.DenyExpanded; e != nil {
				aw := globMarked(e.Words, e.Globs, e.Shapes)
				ts = append(ts, strs(aw))
				for _, v := range optionSkips(aw) {
					ts = append(ts, strs(v))
				}
			}
			if len(w) > 0 {
				if b := path.Base(w[0]); len(b) > len("git-") && strings.HasPrefix(b, "git-") {
					// git-push (git's exec path holds its commands as programs) is git push.
					gw := append([]string{"git", b[len("git-"):]}, w[1:]...)
					ts = append(ts, strs(gw))
					for _, v := range optionSkips(gw) {
						ts = append(ts, strs(v))
					}
				}
			}
			if len(w) > 0 && strings.IndexByte(w[0], '/') >= 0 {
				// /usr/bin/curl is curl to a deny rule: both spellings are matched, so a
				// rule written with the path still hits.
				if b := path.Base(w[0]); b != w[0] && b != "/" && b != "." {
					bw := make([]string, len(w))
					copy(bw, w)
					bw[0] = b
					ts = append(ts, strs(bw))
					for _, v := range optionSkips(bw) {
						ts = append(ts, strs(v))
					}
				}
			}
		}
		return ast.ArrayTerm(ts...)
	}
	if w := commandWords(f.Input); len(w) > 0 {
		return ast.ArrayTerm(strs(w))
	}
	return emptyArray
}

// globMarked is words with each word the shell expands marked for the matcher
// (permission.MatchBashGlobs) with what it may become.
func globMarked(words []string, globs []classifier.GlobKind, shapes []string) []string {
	if len(globs) != len(words) {
		return words
	}
	out := make([]string, len(words))
	for i, w := range words {
		switch globs[i] {
		case classifier.GlobPattern:
			out[i] = permission.GlobPatternMark + w
		case classifier.GlobAny:
			out[i] = permission.GlobAnyMark + w
		case classifier.GlobOne:
			if len(shapes) != len(words) {
				out[i] = permission.GlobAnyMark + w // no shape to go by: any words
				continue
			}
			out[i] = permission.GlobOneMark + shapes[i]
		default:
			out[i] = w
		}
	}
	return out
}

// maxOptionSkips bounds the extra word lists optionSkips gives one command, and
// maxOptionWords how far past the program it looks for them: global options are few, and a
// command of a million option words must not cost a million-word copy per reading.
const (
	maxOptionSkips = 8
	maxOptionWords = 16
)

// optionSkips are w with the options between the program and an operand taken out
// (`git -C x push` as `git push`), for deny and ask rules: programs with subcommands take
// global options before them (git -C/-c/--git-dir, docker -H, kubectl -n, make -C, npm
// --prefix, terraform -chdir=, cargo +toolchain), and Bash(git push:*) missed
// `git -C . push`, which then ran unasked in bypassPermissions. Whether an option takes the
// next word as its argument is the program's to say, so each reading is given: every operand
// reached through options, each optionally followed by one argument, starts a variant. Deny
// rules err toward matching; allow rules never see these.
func optionSkips(w []string) [][]string {
	isOpt := func(j int) bool {
		return strings.HasPrefix(w[j], "-") || j == 1 && strings.HasPrefix(w[j], "+") && len(w[j]) > 1
	}
	if len(w) < 3 || !isOpt(1) {
		return nil
	}
	var out [][]string
	for k := 2; k < len(w) && k <= maxOptionWords && len(out) < maxOptionSkips; k++ {
		// w[1:k] must read as options, each perhaps followed by its argument.
		if !isOpt(k-1) && !(k-2 >= 1 && isOpt(k-2)) {
			break
		}
		if isOpt(k) {
			continue
		}
		if w[k-1] == "--" && isMarked(w[k]) {
			// Past --, an expansion is an operand: `rm -- "$f"` never reads as `rm -rf`.
			break
		}
		v := make([]string, 0, 1+len(w)-k)
		out = append(out, append(append(v, w[0]), w[k:]...))
	}
	return out
}

// isMarked reports a word globMarked marked as one the shell expands.
func isMarked(w string) bool {
	return w != "" && strings.IndexByte(permission.GlobMarks, w[0]) >= 0
}

// commandWords is the command text split on whitespace, for text the classifier could not
// parse: deny rules still see it.
func commandWords(in map[string]any) []string {
	c, _ := in["command"].(string)
	return nonNilFields(c)
}

func nonNilFields(s string) []string {
	f := strings.Fields(s)
	if f == nil {
		return []string{}
	}
	return f
}
