package policy

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/sandboxd/sandboxd/permission"
)

// The Rego decides which rules apply and in what order; these builtins only do the pattern
// matching, in Go, over rule lists the Rego hands them. A Rego loop over 200 rules with a
// builtin call per rule costs ~1 us per rule in the evaluator; one call scanning a list is a
// map lookup per rule. They are registered globally (init) so the compiler, `opa test`-style
// runs (RunTests), bundles and OPA's own command line (sbctl opa) all see the same capabilities;
// capabilities.json declares them to a stock opa.

var (
	ruleList = types.NewArray(nil, types.A)
	nullable = types.A
)

// Builtin names, as the Rego calls them.
const (
	bnDenyAskHits  = "sandboxd.deny_ask_hits"
	bnPathsAllowed = "sandboxd.paths_allowed"
	bnToolHit      = "sandboxd.tool_hit"
	bnAllPathsHit  = "sandboxd.all_paths_hit"
	bnAllWordsHit  = "sandboxd.all_words_hit"
	bnDomainHit    = "sandboxd.domain_hit"
	bnWebHit       = "sandboxd.web_hit"
	bnPathWithin   = "sandboxd.path_within"
	bnAbsPath      = "sandboxd.abs_path"
	bnBelowHit     = "sandboxd.below_hit"
	bnUnseenRead   = "sandboxd.unseen_read_hit"
)

func init() { RegisterBuiltins() }

var registerOnce sync.Once

// RegisterBuiltins registers the sandboxd.* builtins with OPA globally: the compiler's default
// capabilities (ast.CapabilitiesForThisVersion), the evaluator and the test runner all see them
// afterwards. The package's init calls it, so whatever links policy has them, the daemon first;
// a program that hands its arguments to OPA's command line calls it as well, so that its
// builtins do not hang on an import's side effect. A second call does nothing (OPA would
// declare each builtin twice).
func RegisterBuiltins() { registerOnce.Do(registerBuiltins) }

func registerBuiltins() {
	rego.RegisterBuiltinDyn(&rego.Function{
		Name: bnDenyAskHits,
		Description: "deny_ask_hits(rules, tool, params, words, path_subjects, domain, bash, http): the first deny and the first " +
			"ask rule matching any part of the call (whole-tool rules, tool-name patterns, parameter rules, Bash " +
			"rules for each word list, path rules for each [path, [bucket]], domain rules, WebFetch(METHOD host/path) " +
			"rules against http {method, path}, in this order), as {\"deny\": rule, \"ask\": rule} with a key only " +
			"where a rule matched. When bash (the classification) is opaque and no rule denied, the first Bash deny " +
			"(else ask) rule is the ask hit: a command known only at run time may be the one it names. When http is " +
			"null (a tunnel: only the host is known), a method/path rule naming the host hits unless a domain allow rule " +
			"for the host comes from a source at least as strong. One call for both: each call costs the evaluator " +
			"more than the scan.",
		Decl: types.NewFunction(types.Args(types.A, types.S, types.A, types.A, types.A, types.S, types.A, types.A), types.A),
	}, denyAskHits)
	rego.RegisterBuiltin2(&rego.Function{
		Name: bnUnseenRead,
		Description: "unseen_read_hit(rules, workdirs): for a Bash line reading a path known only at run time, the first Read " +
			"deny (else ask) path rule that only the decision holds somewhere outside the session's directories " +
			"(a wildcard pattern whose literal start is / or holds one of workdirs), with a reason; undefined when none.",
		Decl: types.NewFunction(types.Args(types.A, types.A), nullable),
	}, undefinedIfNull2(unseenReadHit))
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnPathsAllowed,
		Description: "True if every [path, [bucket]] subject is matched by a rule of one of its buckets (vacuously true).",
		Decl:        types.NewFunction(types.Args(types.A, types.A), types.B),
	}, func(bctx rego.BuiltinContext, bucketsT, subjT *ast.Term) (*ast.Term, error) {
		ps, ok := subjT.Value.(*ast.Array)
		if !ok {
			return ast.InternedTerm(false), nil
		}
		if ps.Len() == 0 {
			return ast.InternedTerm(true), nil
		}
		t, err := allPathsHit(bctx, bucketsT, subjT)
		if err != nil {
			return nil, err
		}
		return ast.InternedTerm(!isNull(t)), nil
	})
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnToolHit,
		Description: "First whole-tool rule, then tool-name pattern rule, of a behavior's rule data for the tool; undefined when none.",
		Decl:        types.NewFunction(types.Args(types.A, types.S), nullable),
	}, undefinedIfNull2(func(_ rego.BuiltinContext, data, tool *ast.Term) (*ast.Term, error) {
		obj, ok := data.Value.(ast.Object)
		ts, ok2 := tool.Value.(ast.String)
		if !ok || !ok2 {
			return ast.NullTerm(), nil
		}
		return toolHit(obj, string(ts)), nil
	}))
	rego.RegisterBuiltin2(&rego.Function{
		Name: bnAllPathsHit,
		Description: "Given path rule buckets and [[path, [bucket]]], the first rule matching the first path if " +
			"every path is matched by a rule of one of its buckets; null if any is not, or there are none.",
		Decl: types.NewFunction(types.Args(types.A, types.A), nullable),
	}, undefinedIfNull2(allPathsHit))
	rego.RegisterBuiltin2(&rego.Function{
		Name: bnAllWordsHit,
		Description: "Given a Bash rule bucket {word, other} and [{w: [word], exact: bool}], the first rule " +
			"matching the first command if every command is matched; null if any is not, or there are none.",
		Decl: types.NewFunction(types.Args(types.A, types.A), nullable),
	}, undefinedIfNull2(allWordsHit))
	rego.RegisterBuiltin2(&rego.Function{
		Name:        bnDomainHit,
		Description: "First WebFetch domain rule matching the host; undefined when none.",
		Decl:        types.NewFunction(types.Args(ruleList, types.S), nullable),
	}, undefinedIfNull2(func(_ rego.BuiltinContext, rules, h *ast.Term) (*ast.Term, error) {
		s, ok := h.Value.(ast.String)
		if !ok || s == "" {
			return ast.NullTerm(), nil
		}
		return firstMatch(rules, func(pat string, _ ast.Object) bool { return permission.MatchDomain(pat, string(s)) }), nil
	}))
	rego.RegisterBuiltin3(&rego.Function{
		Name: bnWebHit,
		Description: "First WebFetch(METHOD host/path) rule matching the host and http {method, path} exactly (allow " +
			"rules: no case folding); undefined when none or when http is null (a tunnel, whose method and path are unseen).",
		Decl: types.NewFunction(types.Args(ruleList, types.S, types.A), nullable),
	}, func(_ rego.BuiltinContext, rules, h, web *ast.Term) (*ast.Term, error) {
		req, ok := webRequest(h, web)
		if !ok {
			return nil, nil
		}
		t := firstWebMatch(rules, req, false)
		if isNull(t) {
			return nil, nil
		}
		return t, nil
	})
	rego.RegisterBuiltin2(&rego.Function{
		Name: bnBelowHit,
		Description: "Given path rule buckets and [[path, [bucket]]], the first rule of a path's buckets that may match " +
			"something strictly below that path (a tree a search reads); undefined when none.",
		Decl: types.NewFunction(types.Args(types.A, types.A), nullable),
	}, undefinedIfNull2(belowHit))
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

var (
	toolsKey   = ast.StringTerm("tools")
	globsKey   = ast.StringTerm("globs")
	paramsKey  = ast.StringTerm("params")
	bashKey    = ast.StringTerm("bash")
	pathsKey   = ast.StringTerm("paths")
	domainsKey = ast.StringTerm("domains")
	wKey       = ast.StringTerm("w")
	exactKey   = ast.StringTerm("exact")
)

func getObj(o ast.Object, k *ast.Term) ast.Object {
	if t := o.Get(k); t != nil {
		if x, ok := t.Value.(ast.Object); ok {
			return x
		}
	}
	return nil
}

func getStr(o ast.Object, k *ast.Term) string {
	if t := o.Get(k); t != nil {
		if s, ok := t.Value.(ast.String); ok {
			return string(s)
		}
	}
	return ""
}

func getArr(o ast.Object, k *ast.Term) *ast.Array {
	if t := o.Get(k); t != nil {
		if a, ok := t.Value.(*ast.Array); ok {
			return a
		}
	}
	return nil
}

func toolHit(data ast.Object, tool string) *ast.Term {
	if tools := getObj(data, toolsKey); tools != nil {
		if l := tools.Get(ast.StringTerm(tool)); l != nil {
			if a, ok := l.Value.(*ast.Array); ok && a.Len() > 0 {
				return a.Elem(0)
			}
		}
	}
	if g := data.Get(globsKey); g != nil {
		return firstMatch(g, func(pat string, _ ast.Object) bool { return permission.MatchGlob(pat, tool) })
	}
	return ast.NullTerm()
}

// undefinedIfNull2 makes a *_hit builtin undefined when nothing matched
// (the Go helpers say null): a Rego body then fails at the call itself, with no "!= null"
// to evaluate after it on every decision.
func undefinedIfNull2(f rego.Builtin2) rego.Builtin2 {
	return func(bctx rego.BuiltinContext, a, b *ast.Term) (*ast.Term, error) {
		t, err := f(bctx, a, b)
		if err != nil || isNull(t) {
			return nil, err
		}
		return t, nil
	}
}

var (
	denyKey   = ast.StringTerm("deny")
	askKey    = ast.StringTerm("ask")
	allowKey  = ast.StringTerm("allow")
	webKey    = ast.StringTerm("web")
	methodKey = ast.StringTerm("method")
	pathKey   = ast.StringTerm("path")
)

// webRequest reads the host and the http fact ({method, path}); ok is false when either is
// missing (a tunnel, or another tool).
func webRequest(h, web *ast.Term) (permission.WebRequest, bool) {
	host, ok := h.Value.(ast.String)
	obj, ok2 := web.Value.(ast.Object)
	if !ok || !ok2 || host == "" {
		return permission.WebRequest{}, false
	}
	m, p := getStr(obj, methodKey), getStr(obj, pathKey)
	if m == "" {
		return permission.WebRequest{}, false
	}
	return permission.WebRequest{Method: m, Host: string(host), Path: p}, true
}

// firstWebMatch is the first web rule of a list matching req.
func firstWebMatch(rules *ast.Term, req permission.WebRequest, fold bool) *ast.Term {
	return firstMatch(rules, func(host string, r ast.Object) bool {
		return permission.MatchWeb(host, getStr(r, methodKey), getStr(r, pathKey), req, fold)
	})
}

// blindWebHit is the hit of a tunnel (http null: only the host is known) to a host that a
// method/path rule of behavior k names: the tunnel could carry the very request the rule is
// about, so the rule hits, unless a domain allow rule for the host comes from a source at least
// as strong as the rule's (that source has said the host may be reached by host alone). The
// hit carries a reason saying so. nil when nothing hits.
func blindWebHit(rules ast.Object, k *ast.Term, host string) *ast.Term {
	data := getObj(rules, k)
	if data == nil {
		return nil
	}
	web := getArr(data, webKey)
	if web == nil {
		return nil
	}
	// The host-level allows: domain rules naming the host, and a bare WebFetch allow (every host).
	strongestAllow := len(permission.Sources) + 1
	if a := getObj(rules, allowKey); a != nil {
		consider := func(l *ast.Array, match bool) {
			for i := 0; l != nil && i < l.Len(); i++ {
				if o, ok := l.Elem(i).Value.(ast.Object); ok && (!match || permission.MatchDomain(getStr(o, patternKey), host)) {
					strongestAllow = min(strongestAllow, permission.Source(getStr(o, sourceKey)).Rank())
				}
			}
		}
		consider(getArr(a, domainsKey), true)
		if tools := getObj(a, toolsKey); tools != nil {
			if l := tools.Get(ast.StringTerm("WebFetch")); l != nil {
				arr, _ := l.Value.(*ast.Array)
				consider(arr, false)
			}
		}
	}
	for i := 0; i < web.Len(); i++ {
		o, ok := web.Elem(i).Value.(ast.Object)
		if !ok || !permission.MatchDomain(getStr(o, patternKey), host) {
			continue
		}
		if strongestAllow <= permission.Source(getStr(o, sourceKey)).Rank() {
			continue
		}
		hit := o.Copy()
		hit.Insert(reasonKey, ast.StringTerm(fmt.Sprintf(
			"%s rule %s (%s) is about methods and paths of %s, which a tunnel (HTTPS, CONNECT, SOCKS) does not show; "+
				"a tunnel to %s is refused unless WebFetch(domain:%s) is allowed in %s or a stronger source (then HTTPS to it is decided by host only)",
			string(k.Value.(ast.String)), getStr(o, ruleKey), getStr(o, sourceKey), host, host, host, getStr(o, sourceKey))))
		return ast.NewTerm(hit)
	}
	return nil
}

func denyAskHits(bctx rego.BuiltinContext, args []*ast.Term) (*ast.Term, error) {
	out := ast.NewObject()
	if len(args) < 6 {
		return ast.NewTerm(out), nil
	}
	rules, ok := args[0].Value.(ast.Object)
	if !ok {
		return ast.NewTerm(out), nil
	}
	for _, k := range []*ast.Term{denyKey, askKey} {
		data := rules.Get(k)
		if data == nil {
			continue
		}
		t, err := anyHit(bctx, append([]*ast.Term{data}, args[1:]...))
		if err != nil {
			return nil, err
		}
		if !isNull(t) {
			out.Insert(k, t)
		}
	}
	// A tunnel: the domain is known, its method and path are not.
	if d, ok := args[5].Value.(ast.String); ok && d != "" && (len(args) < 8 || isNull(args[7])) {
		for _, k := range []*ast.Term{denyKey, askKey} {
			if out.Get(k) != nil {
				continue
			}
			if t := blindWebHit(rules, k, string(d)); t != nil {
				out.Insert(k, t)
			}
		}
	}
	if len(args) > 6 && out.Get(denyKey) == nil && out.Get(askKey) == nil && opaqueBash(args[6]) {
		if t := opaqueHit(rules); t != nil {
			out.Insert(askKey, t)
		}
	}
	return ast.NewTerm(out), nil
}

var readKey = ast.StringTerm("read")

// unseenReadHit is the ask hit of a Bash line that reads a path known only at run time that
// may lie anywhere (`cat $HOME/x`, `cat ~/o*/k`): the first Read deny rule, else ask rule,
// that only the decision holds somewhere outside the session's directories (workdirs), since
// the decision cannot see where this read goes. Like an opaque command's, it asks, never
// auto: denied in dontAsk and bypassPermissions. The kernel holds the rest wherever the path
// turns out to be: a literal path, everything under one (`Read(//dir/**)`), and a pattern
// whose literal start lies in a session dir or apart from them all (the sandbox walks it
// there); a pattern starting at / or at a dir that holds a session dir (`Read(.env)`,
// `Read(~/**/*.key)`) it holds in the session's dirs only.
func unseenReadHit(_ rego.BuiltinContext, rulesT, workdirsT *ast.Term) (*ast.Term, error) {
	rules, ok := rulesT.Value.(ast.Object)
	workdirs, ok2 := stringsOf(workdirsT)
	if !ok || !ok2 {
		return ast.NullTerm(), nil
	}
	for _, k := range []*ast.Term{denyKey, askKey} {
		data := getObj(rules, k)
		if data == nil {
			continue
		}
		paths := getObj(data, pathsKey)
		if paths == nil {
			continue
		}
		l := getArr(paths, readKey)
		if l == nil {
			continue
		}
		for i := 0; i < l.Len(); i++ {
			obj, ok := l.Elem(i).Value.(ast.Object)
			if !ok || !permission.DecidedOnlyOutside(getStr(obj, patternKey), workdirs) {
				continue
			}
			hit := obj.Copy()
			hit.Insert(reasonKey, ast.StringTerm(fmt.Sprintf(
				"a path the command reads is known only when it runs, and may be one that %s rule %s (%s) names, "+
					"which outside the session's directories only this decision holds; name the path, or write the rule "+
					"from the place it protects (the kernel then holds it)",
				string(k.Value.(ast.String)), getStr(obj, ruleKey), getStr(obj, sourceKey))))
			return ast.NewTerm(hit), nil
		}
	}
	return ast.NullTerm(), nil
}

var (
	opaqueKey = ast.StringTerm("opaque")
	reasonKey = ast.StringTerm("reason")
	ruleKey   = ast.StringTerm("rule")
	sourceKey = ast.StringTerm("source")
)

// opaqueBash reports a classification (input.bash) with a command known only at run time.
func opaqueBash(t *ast.Term) bool {
	o, ok := t.Value.(ast.Object)
	if !ok {
		return false
	}
	v := o.Get(opaqueKey)
	if v == nil {
		return false
	}
	b, ok := v.Value.(ast.Boolean)
	return ok && bool(b)
}

// opaqueHit is the ask hit of an opaque command line: the first Bash deny rule, else the
// first Bash ask rule (a command that only exists at run time may be the one a rule names,
// so it asks, never auto: denied in dontAsk and bypassPermissions), with a reason that says
// why; nil when there is no Bash deny or ask rule, so opaque alone changes nothing.
func opaqueHit(rules ast.Object) *ast.Term {
	for _, k := range []*ast.Term{denyKey, askKey} {
		data := getObj(rules, k)
		if data == nil {
			continue
		}
		r := firstBashRule(getObj(data, bashKey))
		if r == nil {
			continue
		}
		obj, ok := r.Value.(ast.Object)
		if !ok {
			continue
		}
		hit := obj.Copy()
		hit.Insert(reasonKey, ast.StringTerm(fmt.Sprintf(
			"a command known only at run time (built by expansion, or a script the policy cannot read) may run what %s rule %s (%s) names",
			string(k.Value.(ast.String)), getStr(obj, ruleKey), getStr(obj, sourceKey))))
		return ast.NewTerm(hit)
	}
	return nil
}

// firstBashRule is the first rule of a Bash rule bucket: the first pattern-indexed list is
// chosen by its smallest first word, so the answer does not depend on map order.
func firstBashRule(bucket ast.Object) *ast.Term {
	if bucket == nil {
		return nil
	}
	if a := getArr(bucket, otherKey); a != nil && a.Len() > 0 {
		return a.Elem(0)
	}
	words := getObj(bucket, wordKey)
	if words == nil {
		return nil
	}
	var best *ast.Term
	bestKey := ""
	words.Foreach(func(k, v *ast.Term) {
		ks, ok := k.Value.(ast.String)
		a, ok2 := v.Value.(*ast.Array)
		if !ok || !ok2 || a.Len() == 0 {
			return
		}
		if best == nil || string(ks) < bestKey {
			best, bestKey = a.Elem(0), string(ks)
		}
	})
	return best
}

// anyHit is the scan behind deny_ask_hits for one behavior's rule data (args[0]; the rest as
// deny_ask_hits takes them): the first rule matching any part of the call, or null.
func anyHit(bctx rego.BuiltinContext, args []*ast.Term) (*ast.Term, error) {
	if len(args) < 6 {
		return ast.NullTerm(), nil
	}
	data, ok := args[0].Value.(ast.Object)
	ts, ok2 := args[1].Value.(ast.String)
	if !ok || !ok2 {
		return ast.NullTerm(), nil
	}
	tool := string(ts)
	if t := toolHit(data, tool); !isNull(t) {
		return t, nil
	}
	if params := getObj(data, paramsKey); params != nil {
		if l := params.Get(ast.StringTerm(tool)); l != nil {
			if t, _ := paramMatch(rego.BuiltinContext{}, l, args[2]); !isNull(t) {
				return t, nil
			}
		}
	}
	if bucket := data.Get(bashKey); bucket != nil {
		if ws, ok := args[3].Value.(*ast.Array); ok {
			for i := 0; i < ws.Len(); i++ {
				if t, _ := bashMatch(bctx, bucket, ws.Elem(i), ast.InternedTerm(false), false); !isNull(t) {
					return t, nil
				}
			}
		}
	}
	if pb := getObj(data, pathsKey); pb != nil {
		if ps, ok := args[4].Value.(*ast.Array); ok {
			b := matchBudget(bctx)
			for i := 0; i < ps.Len(); i++ {
				t, err := pathHit(pb, ps.Elem(i), b)
				if err != nil {
					return nil, err
				}
				if !isNull(t) {
					return t, nil
				}
			}
		}
	}
	if d, ok := args[5].Value.(ast.String); ok && d != "" {
		if l := data.Get(domainsKey); l != nil {
			if t := firstMatch(l, func(pat string, _ ast.Object) bool { return permission.MatchDomain(pat, string(d)) }); !isNull(t) {
				return t, nil
			}
		}
		if l := data.Get(webKey); l != nil && len(args) > 7 {
			if req, ok := webRequest(args[5], args[7]); ok {
				return firstWebMatch(l, req, true), nil
			}
		}
	}
	return ast.NullTerm(), nil
}

// matchBudgetKey keys the decision's permission.MatchBudget in the context it is evaluated
// with (Engine.eval).
type matchBudgetKey struct{}

// matchBudget is the decision's path matching budget, or a fresh one where the evaluation
// brought none (the test runner, opa eval): then each builtin call has its own.
func matchBudget(bctx rego.BuiltinContext) *permission.MatchBudget {
	if bctx.Context != nil {
		if b, ok := bctx.Context.Value(matchBudgetKey{}).(*permission.MatchBudget); ok {
			return b
		}
	}
	return permission.NewMatchBudget()
}

// pathHit matches one [path, [bucket...]] subject against the path buckets, charging b. Over
// budget it fails (the decision then denies): neither a match nor its absence is known.
func pathHit(buckets ast.Object, subj *ast.Term, b *permission.MatchBudget) (*ast.Term, error) {
	pair, ok := subj.Value.(*ast.Array)
	if !ok || pair.Len() != 2 {
		return ast.NullTerm(), nil
	}
	p, ok := pair.Elem(0).Value.(ast.String)
	names, ok2 := pair.Elem(1).Value.(*ast.Array)
	if !ok || !ok2 || p == "" {
		return ast.NullTerm(), nil
	}
	if !strings.HasPrefix(string(p), "/") {
		return ast.NullTerm(), nil
	}
	segs := permission.SplitPath(string(p))
	return bucketsHit(buckets, names, func(pat string) (bool, error) { return permission.MatchPathSegsWithin(pat, segs, b) })
}

// bucketsHit is the first rule, bucket by bucket in the order names gives, that hit matches,
// or null. An error of hit ends the search and is the answer: neither a match nor its
// absence is known.
func bucketsHit(buckets ast.Object, names *ast.Array, hit func(pat string) (bool, error)) (*ast.Term, error) {
	for j := 0; j < names.Len(); j++ {
		l := buckets.Get(names.Elem(j))
		if l == nil {
			continue
		}
		var err error
		t := firstMatch(l, func(pat string, _ ast.Object) bool {
			h, e := hit(pat)
			if e != nil {
				err = e
				return true // stop: the error decides
			}
			return h
		})
		if err != nil {
			return nil, err
		}
		if !isNull(t) {
			return t, nil
		}
	}
	return ast.NullTerm(), nil
}

// belowHit is the first rule, of the buckets of any [path, [bucket]] subject, that may match a
// path below that subject (permission.MayMatchBelowWithin), or null.
func belowHit(bctx rego.BuiltinContext, bucketsT, subjT *ast.Term) (*ast.Term, error) {
	buckets, ok := bucketsT.Value.(ast.Object)
	ps, ok2 := subjT.Value.(*ast.Array)
	if !ok || !ok2 {
		return ast.NullTerm(), nil
	}
	b := matchBudget(bctx)
	for i := 0; i < ps.Len(); i++ {
		pair, ok := ps.Elem(i).Value.(*ast.Array)
		if !ok || pair.Len() != 2 {
			continue
		}
		p, ok := pair.Elem(0).Value.(ast.String)
		names, ok2 := pair.Elem(1).Value.(*ast.Array)
		if !ok || !ok2 || !strings.HasPrefix(string(p), "/") {
			continue
		}
		segs := permission.SplitPath(string(p))
		t, err := bucketsHit(buckets, names, func(pat string) (bool, error) { return permission.MayMatchBelowWithin(pat, segs, b) })
		if err != nil || isNull(t) {
			if err != nil {
				return t, err
			}
			continue
		}
		// The dir whose tree the rule reaches into, for the reason to name: a line may read
		// several trees (grep -r . src), of which the rule covers one.
		if hit, ok := t.Value.(ast.Object); ok {
			hit = hit.Copy()
			hit.Insert(ast.StringTerm("below"), ast.StringTerm(string(p)))
			return ast.NewTerm(hit), nil
		}
		return t, nil
	}
	return ast.NullTerm(), nil
}

func allPathsHit(bctx rego.BuiltinContext, bucketsT, subjT *ast.Term) (*ast.Term, error) {
	buckets, ok := bucketsT.Value.(ast.Object)
	ps, ok2 := subjT.Value.(*ast.Array)
	if !ok || !ok2 || ps.Len() == 0 {
		return ast.NullTerm(), nil
	}
	b := matchBudget(bctx)
	var first *ast.Term
	for i := 0; i < ps.Len(); i++ {
		t, err := pathHit(buckets, ps.Elem(i), b)
		if err != nil {
			return nil, err
		}
		if isNull(t) {
			return t, nil
		}
		if first == nil {
			first = t
		}
	}
	return first, nil
}

func allWordsHit(_ rego.BuiltinContext, bucket, subjT *ast.Term) (*ast.Term, error) {
	cmds, ok := subjT.Value.(*ast.Array)
	if !ok || cmds.Len() == 0 {
		return ast.NullTerm(), nil
	}
	var first *ast.Term
	for i := 0; i < cmds.Len(); i++ {
		c, ok := cmds.Elem(i).Value.(ast.Object)
		if !ok {
			return ast.NullTerm(), nil
		}
		w := c.Get(wKey)
		exact := c.Get(exactKey)
		if w == nil || exact == nil {
			return ast.NullTerm(), nil
		}
		t, _ := bashMatch(rego.BuiltinContext{}, bucket, w, exact, true)
		if isNull(t) {
			return t, nil
		}
		if first == nil {
			first = t
		}
	}
	return first, nil
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

// bashMatch is the first Bash rule of bucket that matches the command's words; allow rules
// (allowRules) match only where the pattern's blanks fall between words.
func bashMatch(bctx rego.BuiltinContext, bucket, words, exact *ast.Term, allowRules bool) (*ast.Term, error) {
	obj, ok := bucket.Value.(ast.Object)
	ws, ok2 := stringsOf(words)
	if !ok || !ok2 || len(ws) == 0 {
		return ast.NullTerm(), nil
	}
	exactOnly := false
	if b, ok := exact.Value.(ast.Boolean); ok {
		exactOnly = bool(b)
	}
	text := strings.Join(ws, " ")
	match := func(pat string, _ ast.Object) bool { return permission.MatchBashText(pat, text, exactOnly) }
	if allowRules {
		match = func(pat string, _ ast.Object) bool { return permission.MatchBashAllow(pat, text, ws, exactOnly) }
	} else if strings.ContainsAny(text, permission.GlobMarks) {
		// Words the shell expands (globMarked): matched for what they may become, within the
		// decision's budget.
		b := matchBudget(bctx)
		match = func(pat string, _ ast.Object) bool { return permission.MatchBashGlobs(pat, ws, exactOnly, b) }
	}
	// Rules are indexed by their literal first word; the command's first word is the text up
	// to the first space, the same boundary the matcher sees.
	first, _, _ := strings.Cut(text, " ")
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
		case ast.Number:
			s = numberText(x)
		case ast.Boolean:
			s = x.String()
		default:
			return false // objects, arrays, null: not a top-level scalar
		}
		return permission.MatchGlob(pat, s)
	}), nil
}

// numberText is a JSON number as the agents' JavaScript writes it: 5000.0 and 5e3 are 5000,
// which a rule's value is compared with. The decimal text the call held would let `5e3` past
// a deny of `timeout:5000` that the agent applies to the number.
func numberText(n ast.Number) string {
	f, err := strconv.ParseFloat(string(n), 64)
	switch {
	case math.IsInf(f, 1):
		return "Infinity" // 1e400
	case math.IsInf(f, -1):
		return "-Infinity"
	case err != nil:
		return string(n)
	case f == 0:
		return "0" // -0 too
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
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

// absWord is a shell word as the path it names, for the critical-path rm check and
// acceptEdits. Quotes go first, as the shell removes them: `"$HOME"` and `"${HOME}"/` are the
// home directory, not a directory named $HOME under the cwd, which made `rm -rf "$HOME"` pass
// the critical-path check that `rm -rf $HOME` met. The variables and substitutions that name
// the home or the cwd expand to them, with their ${X:?} and ${X:-...} forms.
func absWord(w, cwd, home string) string {
	w = strings.NewReplacer(`"`, "", `'`, "").Replace(w)
	for _, x := range []struct{ pre, val string }{
		{"~", home}, {"$HOME", home}, {"$PWD", cwd}, {"$(pwd)", cwd}, {"`pwd`", cwd},
		{"${HOME}", home}, {"${PWD}", cwd}, {"${HOME:", home}, {"${PWD:", cwd},
	} {
		rest, ok := strings.CutPrefix(w, x.pre)
		if !ok {
			continue
		}
		if strings.HasSuffix(x.pre, ":") {
			// ${HOME:?msg}, ${HOME:-default}: the value is the variable's when it is set.
			end := strings.IndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		if rest == "" || strings.HasPrefix(rest, "/") {
			w = x.val + rest
			break
		}
	}
	if !strings.HasPrefix(w, "/") {
		w = cwd + "/" + w
	}
	return path.Clean(w)
}

func isNull(t *ast.Term) bool {
	_, ok := t.Value.(ast.Null)
	return ok
}
