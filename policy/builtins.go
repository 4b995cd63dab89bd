package policy

import (
	"path"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/sandboxd/sandboxd/permission"
)

// The Rego decides which rules apply and in what order; these builtins only do the pattern
// matching, in Go, over rule lists the Rego hands them. A Rego loop over 200 rules with a
// builtin call per rule costs ~1 us per rule in the evaluator; one call scanning a list is a
// map lookup per rule. They are registered globally (init) so the compiler, `opa test`-style
// runs (RunTests) and bundles all see the same capabilities.

var (
	ruleList = types.NewArray(nil, types.A)
	nullable = types.A
)

// Builtin names, as the Rego calls them.
const (
	bnBashMatch   = "sandboxd.bash_match"
	bnPathMatch   = "sandboxd.path_match"
	bnDomainMatch = "sandboxd.domain_match"
	bnGlobMatch   = "sandboxd.glob_match"
	bnParamMatch  = "sandboxd.param_match"
	bnPathWithin  = "sandboxd.path_within"
	bnAbsPath     = "sandboxd.abs_path"
)

func init() {
	rego.RegisterBuiltin3(&rego.Function{
		Name:        bnBashMatch,
		Description: "First Bash rule of bucket {word:{w:[rule]}, other:[rule]} matching the words of one simple command, or null. exact_only limits it to exact patterns.",
		Decl:        types.NewFunction(types.Args(types.A, types.NewArray(nil, types.A), types.B), nullable),
	}, bashMatch)
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnPathMatch,
		Description: "First path rule (pattern: absolute gitignore-style glob) matching the path or an ancestor, or null.",
		Decl:        types.NewFunction(types.Args(ruleList, types.S), nullable),
	}, func(_ rego.BuiltinContext, rules, p *ast.Term) (*ast.Term, error) {
		s, ok := p.Value.(ast.String)
		if !ok {
			return ast.NullTerm(), nil
		}
		return firstMatch(rules, func(pat string, _ ast.Object) bool { return permission.MatchPath(pat, string(s)) }), nil
	})
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnDomainMatch,
		Description: "First WebFetch domain rule matching the host, or null.",
		Decl:        types.NewFunction(types.Args(ruleList, types.S), nullable),
	}, func(_ rego.BuiltinContext, rules, h *ast.Term) (*ast.Term, error) {
		s, ok := h.Value.(ast.String)
		if !ok {
			return ast.NullTerm(), nil
		}
		return firstMatch(rules, func(pat string, _ ast.Object) bool { return permission.MatchDomain(pat, string(s)) }), nil
	})
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnGlobMatch,
		Description: "First tool-name pattern rule matching the tool name, or null.",
		Decl:        types.NewFunction(types.Args(ruleList, types.S), nullable),
	}, func(_ rego.BuiltinContext, rules, t *ast.Term) (*ast.Term, error) {
		s, ok := t.Value.(ast.String)
		if !ok {
			return ast.NullTerm(), nil
		}
		return firstMatch(rules, func(pat string, _ ast.Object) bool { return permission.MatchGlob(pat, string(s)) }), nil
	})
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnParamMatch,
		Description: "First parameter rule whose top-level scalar parameter matches, or null. An absent parameter never matches.",
		Decl:        types.NewFunction(types.Args(ruleList, types.A), nullable),
	}, paramMatch)
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnPathWithin,
		Description: "True if the absolute path is one of dirs or below one.",
		Decl:        types.NewFunction(types.Args(types.S, types.NewArray(nil, types.A)), types.B),
	}, pathWithin)
	rego.RegisterBuiltin3(&rego.Function{
		Name:        bnAbsPath,
		Description: "Lexically absolute, cleaned form of a shell word: ~ and $HOME expand to home, relative words join cwd.",
		Decl:        types.NewFunction(types.Args(types.S, types.S, types.S), types.S),
	}, absPath)
}

// firstMatch scans a rule list in order and returns the first rule whose "pattern" matches.
func firstMatch(rules *ast.Term, match func(pattern string, rule ast.Object) bool) *ast.Term {
	arr, ok := rules.Value.(*ast.Array)
	if !ok {
		return ast.NullTerm()
	}
	for i := 0; i < arr.Len(); i++ {
		t := arr.Elem(i)
		obj, ok := t.Value.(ast.Object)
		if !ok {
			continue
		}
		pt := obj.Get(patternKey)
		if pt == nil {
			continue
		}
		if ps, ok := pt.Value.(ast.String); ok && match(string(ps), obj) {
			return t
		}
	}
	return ast.NullTerm()
}

var (
	patternKey = ast.StringTerm("pattern")
	paramKey   = ast.StringTerm("param")
	wordKey    = ast.StringTerm("word")
	otherKey   = ast.StringTerm("other")
)

func stringsOf(t *ast.Term) ([]string, bool) {
	arr, ok := t.Value.(*ast.Array)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, arr.Len())
	for i := 0; i < arr.Len(); i++ {
		s, ok := arr.Elem(i).Value.(ast.String)
		if !ok {
			return nil, false
		}
		out = append(out, string(s))
	}
	return out, true
}

func bashMatch(_ rego.BuiltinContext, bucket, words, exact *ast.Term) (*ast.Term, error) {
	obj, ok := bucket.Value.(ast.Object)
	ws, ok2 := stringsOf(words)
	if !ok || !ok2 || len(ws) == 0 {
		return ast.NullTerm(), nil
	}
	exactOnly := false
	if b, ok := exact.Value.(ast.Boolean); ok {
		exactOnly = bool(b)
	}
	match := func(pat string, _ ast.Object) bool { return permission.MatchBash(pat, ws, exactOnly) }
	// Rules are indexed by their literal first word; the command's first word is the text up
	// to the first space, the same boundary the pattern's regexp sees.
	first, _, _ := strings.Cut(ws[0], " ")
	if wm := obj.Get(wordKey); wm != nil {
		if wo, ok := wm.Value.(ast.Object); ok {
			if list := wo.Get(ast.StringTerm(first)); list != nil {
				if t := firstMatch(list, match); !isNull(t) {
					return t, nil
				}
			}
		}
	}
	if other := obj.Get(otherKey); other != nil {
		return firstMatch(other, match), nil
	}
	return ast.NullTerm(), nil
}

func paramMatch(_ rego.BuiltinContext, rules, params *ast.Term) (*ast.Term, error) {
	obj, ok := params.Value.(ast.Object)
	if !ok {
		return ast.NullTerm(), nil
	}
	return firstMatch(rules, func(pat string, rule ast.Object) bool {
		name := rule.Get(paramKey)
		if name == nil {
			return false
		}
		v := obj.Get(name)
		if v == nil {
			return false // an absent parameter never matches
		}
		var s string
		switch x := v.Value.(type) {
		case ast.String:
			s = string(x)
		case ast.Boolean, ast.Number:
			s = x.String()
		default:
			return false // objects, arrays, null: not a top-level scalar
		}
		return permission.MatchGlob(pat, s)
	}), nil
}

func pathWithin(_ rego.BuiltinContext, p, dirs *ast.Term) (*ast.Term, error) {
	s, ok := p.Value.(ast.String)
	ds, ok2 := stringsOf(dirs)
	if !ok || !ok2 || !strings.HasPrefix(string(s), "/") {
		return ast.BooleanTerm(false), nil
	}
	return ast.BooleanTerm(within(path.Clean(string(s)), ds)), nil
}

func within(p string, dirs []string) bool {
	for _, d := range dirs {
		if !strings.HasPrefix(d, "/") {
			continue
		}
		d = path.Clean(d)
		if p == d || d == "/" || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

func absPath(_ rego.BuiltinContext, w, cwd, home *ast.Term) (*ast.Term, error) {
	ws, _ := w.Value.(ast.String)
	cs, _ := cwd.Value.(ast.String)
	hs, _ := home.Value.(ast.String)
	return ast.StringTerm(absWord(string(ws), string(cs), string(hs))), nil
}

func absWord(w, cwd, home string) string {
	for _, pre := range []string{"~", "$HOME", "${HOME}"} {
		if w == pre || strings.HasPrefix(w, pre+"/") {
			w = home + strings.TrimPrefix(w, pre)
			break
		}
	}
	w = strings.Trim(w, `"'`)
	if !strings.HasPrefix(w, "/") {
		w = cwd + "/" + w
	}
	return path.Clean(w)
}

func isNull(t *ast.Term) bool {
	_, ok := t.Value.(ast.Null)
	return ok
}
