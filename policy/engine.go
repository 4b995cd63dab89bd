package policy

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/internal/regfile"
	"github.com/sandboxd/sandboxd/permission"
)

//go:embed rego
var embedded embed.FS

// Query is the one entrypoint of the policy.
const Query = "data.sandboxd.main.decision"

// maxPolicyModuleBytes bounds one Rego module of the policy dir.
const maxPolicyModuleBytes = 4 << 20

// customPackage is where admin modules must live; the decision chain only reads its deny
// and ask sets, so a custom module can add reasons to refuse but never allow.
var customPackage = ast.MustParseRef("data.sandboxd.custom")

// Config configures the engine. The zero value runs the embedded policy alone.
type Config struct {
	// PolicyDir holds admin *.rego files (package sandboxd.custom...), e.g.
	// /etc/sandboxd/policy.d. The directory and files must be root-owned and not writable by
	// others. "" = embedded policy only.
	PolicyDir string
	// WatchInterval polls PolicyDir for changes (names, sizes, mtimes) and reloads; 0 = off.
	WatchInterval time.Duration
	// DecisionCacheSize caches decisions keyed by (policy digest, rules digest, facts); 0 = off.
	DecisionCacheSize int
	// Bundle fetches the policy from an OPA bundle server; nil = off.
	Bundle *BundleConfig
	// OnReload is called after every load attempt (initial, Reload, watcher, bundle), with
	// the digest in force afterwards, so the daemon can audit it. The watcher also fires it
	// when PolicyDir's *.json (admin settings) change: rebuild sessions' RuleSets then. It
	// must not block long.
	OnReload func(ReloadEvent)
	// InsecureSkipOwnerCheck skips the root-ownership check of PolicyDir. Tests only.
	InsecureSkipOwnerCheck bool
	// Modules, when not nil, is the whole policy by module name: nothing embedded, nothing
	// from PolicyDir. A replay compiles a candidate policy this way.
	Modules map[string]string
}

// ReloadEvent reports one load attempt.
type ReloadEvent struct {
	// Trigger is "start", "reload", "watch" or "bundle".
	Trigger string
	// Digest is the digest of the policy in force after the attempt.
	Digest string
	// Previous is the digest before; equal to Digest when nothing changed or on error.
	Previous string
	// Files are the module names compiled (embedded ones prefixed "embedded:").
	Files []string
	// Err is the compile error that kept the old policy, nil on success.
	Err  error
	Time time.Time
}

// compiled is one immutable policy version. Decisions load it once, so a swap never changes
// the policy under an evaluation in flight.
type compiled struct {
	// steps is the policy's chain (data.sandboxd.main.steps), read once per load: a
	// decision's trace is steps[0..i].
	steps   []string
	pq      rego.PreparedEvalQuery
	digest  string
	files   []string
	modules map[string]string
	loaded  time.Time
	// customHTTP: an admin module reads input.http (readsHTTP), so a request's method or path
	// may decide it.
	customHTTP bool
}

// Engine evaluates decisions. It is safe for concurrent use.
type Engine struct {
	cfg    Config
	log    *zap.Logger
	cur    atomic.Pointer[compiled]
	mu     sync.Mutex // serialises loads
	rules  rulesValues
	cache  *decisionCache
	bundle atomic.Pointer[bundleState]
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// New compiles the embedded policy plus PolicyDir's modules and starts the watcher and the
// bundle poller if configured. A broken custom module is an error: the daemon must not start
// on a policy the admin did not mean.
func New(ctx context.Context, cfg Config, log *zap.Logger) (*Engine, error) {
	if log == nil {
		log = zap.NewNop()
	}
	e := &Engine{cfg: cfg, log: log.Named("policy")}
	if cfg.DecisionCacheSize > 0 {
		e.cache = newDecisionCache(cfg.DecisionCacheSize)
	}
	// Stamp the directory before the first load, so a change racing the load is seen by
	// the watcher (at worst it reloads once more).
	stamp := dirStamp(cfg.PolicyDir)
	if err := e.load(ctx, "start"); err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	if cfg.PolicyDir != "" && cfg.WatchInterval > 0 {
		e.wg.Add(1)
		go e.watch(bg, cfg.WatchInterval, stamp)
	}
	if cfg.Bundle != nil {
		if err := e.startBundle(bg); err != nil {
			cancel()
			e.wg.Wait()
			return nil, err
		}
	}
	return e, nil
}

// Close stops the watcher and bundle poller and waits for them.
func (e *Engine) Close() error {
	if e.stop != nil {
		e.stop()
	}
	e.wg.Wait()
	if b := e.bundle.Load(); b != nil {
		b.stop(context.Background())
	}
	return nil
}

// Digest identifies the policy in force: SHA-256 over its module names and sources.
func (e *Engine) Digest() string {
	if c := e.cur.Load(); c != nil {
		return c.digest
	}
	return ""
}

// Modules returns the sources of the policy in force, by name, for `sbctl policy show`.
func (e *Engine) Modules() map[string]string {
	c := e.cur.Load()
	if c == nil {
		return nil
	}
	out := make(map[string]string, len(c.modules))
	for k, v := range c.modules {
		out[k] = v
	}
	return out
}

// Reload recompiles embedded + PolicyDir (+ the last bundle) and swaps atomically.
// Decisions in flight finish on the old policy. On error the old policy stays and the error
// (OPA's, wrapped in ErrPolicyCompile) is returned.
func (e *Engine) Reload(ctx context.Context) error { return e.load(ctx, "reload") }

func (e *Engine) load(ctx context.Context, trigger string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	prev := e.Digest()
	mods, err := e.sources(ctx)
	var c *compiled
	if err == nil {
		c, err = compile(ctx, mods)
	}
	ev := ReloadEvent{Trigger: trigger, Previous: prev, Digest: prev, Err: err, Time: time.Now()}
	if err == nil {
		e.cur.Store(c)
		ev.Digest, ev.Files = c.digest, c.files
		e.log.Info("policy loaded", zap.String("trigger", trigger), zap.String("digest", c.digest), zap.Int("modules", len(c.files)))
	} else {
		e.log.Error("policy load refused; previous policy stays", zap.String("trigger", trigger), zap.Error(err))
	}
	if e.cfg.OnReload != nil {
		e.cfg.OnReload(ev)
	}
	return err
}

// sources gathers the modules: embedded (or a full-policy bundle), the bundle's custom
// modules, and PolicyDir/*.rego. Test files are not part of the evaluated policy.
func (e *Engine) sources(ctx context.Context) (map[string]string, error) {
	mods := map[string]string{}
	if e.cfg.Modules != nil {
		for k, v := range e.cfg.Modules {
			mods[k] = v
		}
		return mods, nil
	}
	b := e.bundle.Load()
	if b == nil || !b.full() {
		em, err := embeddedModules(false)
		if err != nil {
			return nil, err
		}
		for k, v := range em {
			mods[k] = v
		}
	}
	if b != nil {
		for k, v := range b.modules() {
			mods[k] = v
		}
	}
	if e.cfg.PolicyDir != "" {
		dm, err := dirModules(ctx, e.cfg.PolicyDir, !e.cfg.InsecureSkipOwnerCheck, false)
		if err != nil {
			return nil, err
		}
		for k, v := range dm {
			mods[k] = v
		}
	}
	return mods, nil
}

// embeddedModules returns the embedded Rego by name ("embedded:rego/x/x.rego").
func embeddedModules(withTests bool) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(embedded, "rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return err
		}
		if !withTests && strings.HasSuffix(p, "_test.rego") {
			return nil
		}
		b, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		out["embedded:"+p] = string(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read embedded policy: %w", err)
	}
	return out, nil
}

// dirModules reads dir/*.rego (not recursive). Admin files are read with the daemon's
// privileges, so they must be root-owned and not writable by others.
func dirModules(ctx context.Context, dir string, checkOwner, withTests bool) (map[string]string, error) {
	if checkOwner {
		if err := permission.CheckPolicyOwner(dir); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read policy dir: %w", err)
	}
	out := map[string]string{}
	for _, en := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		name := en.Name()
		if en.IsDir() || !strings.HasSuffix(name, ".rego") || (!withTests && strings.HasSuffix(name, "_test.rego")) {
			continue
		}
		p := filepath.Join(dir, name)
		if checkOwner {
			if err := permission.CheckPolicyOwner(p); err != nil {
				return nil, err
			}
		}
		b, err := regfile.Read(p, maxPolicyModuleBytes)
		if err != nil {
			return nil, fmt.Errorf("read policy module: %w", err)
		}
		out[p] = string(b)
	}
	return out, nil
}

// capabilities are OPA's minus the builtins that reach the network or the host, or that are
// nondeterministic (a decision must be a function of its input, for the decision cache and
// for audit replay). Our matchers are registered globally, so they are in.
func capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	drop := map[string]bool{
		"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true, "print": true,
		"trace": true, "rand.intn": true, "uuid.rfc4122": true,
		"time.now_ns": true,
	}
	kept := caps.Builtins[:0:0]
	for _, b := range caps.Builtins {
		if !drop[b.Name] {
			kept = append(kept, b)
		}
	}
	caps.Builtins = kept
	caps.AllowNet = []string{}
	return caps
}

var caps = sync.OnceValue(capabilities)

// parseModules parses every module as rego.v1 and checks that non-embedded ones (admin
// files, non-full bundles) stay inside package sandboxd.custom.
func parseModules(mods map[string]string) (map[string]*ast.Module, error) {
	out := make(map[string]*ast.Module, len(mods))
	for name, src := range mods {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPolicyCompile, err)
		}
		if !strings.HasPrefix(name, "embedded:") && !strings.HasPrefix(name, "bundlefull:") && !m.Package.Path.HasPrefix(customPackage) {
			return nil, fmt.Errorf("%s: %w (got package %s)", name, ErrCustomPackage, m.Package.Path)
		}
		out[name] = m
	}
	return out, nil
}

// compileMu makes one compile at a time in the process. OPA's type checker widens some
// types in place (ast.mergeTypes adds to a dynamic property of an object type it found in a
// types.Any), and such a type can be one every compiler shares (a builtin's declared result):
// two engines compiling at once (a reload beside a replay's, two daemons in a test) race on
// it. Compiles are rare (start, reload), so waiting costs nothing that matters.
var compileMu sync.Mutex

// compile prepares the entrypoint query over mods, strict, once per load.
func compile(ctx context.Context, mods map[string]string) (*compiled, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	parsed, err := parseModules(mods)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(parsed))
	for n := range parsed {
		names = append(names, n)
	}
	sort.Strings(names)
	opts := []func(*rego.Rego){
		rego.Query(Query),
		rego.Capabilities(caps()),
		rego.StrictBuiltinErrors(true),
		rego.Strict(true),
		rego.SetRegoVersion(ast.RegoV1),
	}
	h := sha256.New()
	for _, n := range names {
		opts = append(opts, rego.ParsedModule(parsed[n]))
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", n, len(mods[n]), mods[n])
	}
	pq, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicyCompile, err)
	}
	steps, err := chainSteps(ctx, parsed)
	if err != nil {
		return nil, err
	}
	customHTTP := false
	for n, m := range parsed {
		if !strings.HasPrefix(n, "embedded:") && !strings.HasPrefix(n, "bundlefull:") && readsHTTP(m) {
			customHTTP = true
		}
	}
	return &compiled{steps: steps, pq: pq, digest: hex.EncodeToString(h.Sum(nil)), files: names, modules: mods, loaded: time.Now(), customHTTP: customHTTP}, nil
}

// readsHTTP reports whether m may read input.http, a request's method and path: a reference
// to it, to input whole, or to a key of input not known before evaluation.
func readsHTTP(m *ast.Module) bool {
	found := false
	ast.WalkRefs(m, func(r ast.Ref) bool {
		if found || !r[0].Equal(ast.InputRootDocument) {
			return found
		}
		if len(r) == 1 {
			found = true // input whole, bound to a name or passed on
			return true
		}
		if k, ok := r[1].Value.(ast.String); !ok || k == "http" {
			found = true
		}
		return found
	})
	return found
}

// CustomReadsHTTP reports whether an admin module of the policy in force may decide by a
// request's method or path (input.http): a tunnel, whose requests the proxy cannot see, may
// then carry one such a module would refuse, so the proxy holds tunnels as it does to a host
// a method/path rule names.
func (e *Engine) CustomReadsHTTP() bool {
	c := e.cur.Load()
	return c != nil && c.customHTTP
}

// Decide evaluates the policy for one call. Any error means the caller denies with
// policy_eval_error; an undefined or malformed result is an error too, never an allow.
func (e *Engine) Decide(ctx context.Context, f *permission.Facts, rs *permission.RuleSet) (permission.Decision, error) {
	deny := permission.Decision{Behavior: permission.Deny, Reason: "policy evaluation failed", Source: "policy", Step: "error"}
	if f == nil || rs == nil {
		return deny, ErrNilFacts
	}
	c := e.cur.Load()
	if c == nil {
		return deny, ErrPolicyNotLoaded
	}
	// OPA polls for cancellation only every so many evaluation steps; a cancelled request
	// must not get a decision at all.
	if err := ctx.Err(); err != nil {
		return deny, fmt.Errorf("decide: %w", err)
	}
	var key string
	if e.cache != nil {
		key = cacheKey(c.digest, rs.Digest(), f)
		if d, ok := e.cache.get(key); ok {
			return d, nil
		}
	}
	d, err := e.eval(ctx, c, f, rs)
	if err != nil {
		return deny, err
	}
	if e.cache != nil && key != "" {
		e.cache.put(key, d)
	}
	return d, nil
}

func (e *Engine) eval(ctx context.Context, c *compiled, f *permission.Facts, rs *permission.RuleSet) (permission.Decision, error) {
	rv, err := e.rules.get(rs)
	if err != nil {
		return permission.Decision{}, fmt.Errorf("convert rules: %w", err)
	}
	in, err := buildInput(f, rv, rs.Effective().AdditionalDirectories...)
	if err != nil {
		return permission.Decision{}, fmt.Errorf("build input: %w", err)
	}
	// One path matching budget for the whole decision: its builtins share it.
	ctx = context.WithValue(ctx, matchBudgetKey{}, permission.NewMatchBudget())
	res, err := c.pq.Eval(ctx, rego.EvalParsedInput(in), rego.EvalGenerateJSON(rawTerm))
	if err != nil {
		return permission.Decision{}, fmt.Errorf("evaluate policy: %w", err)
	}
	if len(res) == 0 || len(res[0].Expressions) == 0 {
		return permission.Decision{}, ErrUndefinedDecision
	}
	t, _ := res[0].Expressions[0].Value.(*ast.Term)
	if t == nil {
		return permission.Decision{}, fmt.Errorf("%w: %T", ErrBadDecision, res[0].Expressions[0].Value)
	}
	d, err := toDecision(t, c.steps)
	if err != nil {
		return permission.Decision{}, err
	}
	if b := e.bundle.Load(); b != nil {
		b.logDecision(ctx, c.digest, in, t)
	}
	return d, nil
}

// rawTerm keeps the result as an AST term: the generic conversion to map[string]any costs more
// allocations than the fields we read.
func rawTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

var (
	kBehavior = ast.StringTerm("behavior")
	kReason   = ast.StringTerm("reason")
	kRule     = ast.StringTerm("rule")
	kSource   = ast.StringTerm("source")
	kStep     = ast.StringTerm("step")
	kRoute    = ast.StringTerm("route")
	kAllow    = ast.StringTerm("allow")
	kReadOnly = ast.StringTerm("read_only")
)

// chainSteps evaluates data.sandboxd.main.steps once per load.
func chainSteps(ctx context.Context, parsed map[string]*ast.Module) ([]string, error) {
	opts := []func(*rego.Rego){rego.Query("data.sandboxd.main.steps"), rego.Capabilities(caps()), rego.SetRegoVersion(ast.RegoV1)}
	for _, m := range parsed {
		opts = append(opts, rego.ParsedModule(m))
	}
	rs, err := rego.New(opts...).Eval(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: read steps: %w", ErrPolicyCompile, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, fmt.Errorf("%w: data.sandboxd.main.steps is undefined", ErrPolicyCompile)
	}
	list, ok := rs[0].Expressions[0].Value.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: data.sandboxd.main.steps is not a list", ErrPolicyCompile)
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%w: data.sandboxd.main.steps holds a non-string", ErrPolicyCompile)
		}
		out = append(out, s)
	}
	return out, nil
}

var (
	kI        = ast.StringTerm("i")
	kResolved = ast.StringTerm("resolved")
)

func toDecision(t *ast.Term, steps []string) (permission.Decision, error) {
	m, ok := t.Value.(ast.Object)
	if !ok {
		return permission.Decision{}, fmt.Errorf("%w: %v", ErrBadDecision, ast.ValueName(t.Value))
	}
	d := permission.Decision{
		Behavior: permission.Behavior(getStr(m, kBehavior)),
		Reason:   getStr(m, kReason),
		Rule:     getStr(m, kRule),
		Source:   getStr(m, kSource),
		Step:     getStr(m, kStep),
		Route:    getStr(m, kRoute),
	}
	if it := m.Get(kI); it != nil {
		n, ok := it.Value.(ast.Number)
		i, ok2 := n.Int()
		if !ok || !ok2 || i >= len(steps) || (i >= 0 && steps[i] != d.Step) {
			return permission.Decision{}, fmt.Errorf("%w: step index %v for step %q", ErrBadDecision, it, d.Step)
		}
		if i >= 0 {
			d.Trace = append(make([]string, 0, i+2), steps[:i+1]...)
		} else {
			d.Trace = []string{d.Step}
		}
	}
	if r := m.Get(kResolved); r != nil {
		if b, ok := r.Value.(ast.Boolean); ok && bool(b) {
			d.Trace = append(d.Trace, "resolve")
		}
	}
	allow := false
	if a := m.Get(kAllow); a != nil {
		b, _ := a.Value.(ast.Boolean)
		allow = bool(b)
	}
	if ro := m.Get(kReadOnly); ro != nil {
		b, _ := ro.Value.(ast.Boolean)
		d.ReadOnly = bool(b) && d.Behavior == permission.Allow
	}
	switch d.Behavior {
	case permission.Allow, permission.Deny, permission.Ask:
	default:
		return permission.Decision{}, fmt.Errorf("%w: behavior %q", ErrBadDecision, d.Behavior)
	}
	if allow != (d.Behavior == permission.Allow) {
		return permission.Decision{}, fmt.Errorf("%w: allow=%v with behavior %s", ErrBadDecision, allow, d.Behavior)
	}
	if d.Behavior == permission.Ask && d.Route == "" {
		d.Route = "user"
	}
	return d, nil
}

// watch polls PolicyDir and reloads when its *.rego or *.json files change. Polling, not
// inotify: it works on every filesystem and the directory holds a handful of files.
func (e *Engine) watch(ctx context.Context, every time.Duration, last string) {
	defer e.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := dirStamp(e.cfg.PolicyDir)
		if s == last {
			continue
		}
		last = s
		_ = e.load(ctx, "watch") // logged and reported through OnReload
	}
}

func dirStamp(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "error:" + err.Error()
	}
	var b strings.Builder
	for _, en := range ents {
		// *.json too: admin settings live beside the Rego, and the daemon rebuilds sessions'
		// RuleSets when OnReload reports a watch event.
		if !strings.HasSuffix(en.Name(), ".rego") && !strings.HasSuffix(en.Name(), ".json") {
			continue
		}
		fi, err := en.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s\x00%d\x00%d\x00%o\n", en.Name(), fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	return b.String()
}
