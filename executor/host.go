package executor

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// Host is what tools may use of the daemon: the sandbox that starts confined children, the
// per-session workers that run the file tools as the caller, and the state directory.
type Host struct {
	log     *zap.Logger
	sandbox *sandbox.Sandbox
	cfg     atomic.Pointer[config.Sandbox]
	cfgGen  atomic.Uint64 // counts SetConfig: a file worker started under an older one is checked
	// StateDir is the daemon's state directory (tool-results/ lives under it).
	StateDir string
	// DaemonSocket is hidden from every child: a command that could reach the daemon as its
	// owner could change its own session's mode or rules, or open a laxer session.
	DaemonSocket string
	// ProxyPort is where a proxied session's egress proxy listens on its loopback.
	ProxyPort int
	// WebFetch is the WebFetch tool's way out, through the sessions' egress proxy; set by the
	// daemon before the first call.
	WebFetch WebFetchNet
	// ProxyCA, set when the proxy intercepts TLS (network.tls_intercept), is what a proxied
	// session's programs are told to trust.
	ProxyCA ProxyCA
	// SecretDirs are daemon directories hidden from every child, root's included (the
	// interception CA's key).
	SecretDirs []string
	// Protected, when set, reports a path the policy's protected check asks about when it is
	// written (policy.ProtectedPathPattern): of a tree copied in by a command the caller runs
	// itself, the files it would plant there under such names are put to the policy.
	Protected func(path string) bool
	// AuditInputBytes is the most of a call's input (redacted) the audit log keeps whole
	// (audit.max_input_bytes; 0: all of it). A Bash command past it is refused.
	AuditInputBytes int
	// TaskEnded, when set, is told how each background task ended (the audit log's task.end).
	TaskEnded func(s *session.Session, id string, res *sandbox.Result, err error)
	// toolState is the built-in tools' state: workers, background tasks, budget bookkeeping.
	toolState ToolState
	// resultsMade holds the IDs of sessions whose results directory was made and checked, so
	// a session's calls after its first check it with one lstat instead of mkdirs and lstats.
	resultsMade sync.Map
	// limitsV are the per-user limits (SetLimits); ledger counts each uid's persisted results.
	limitsV atomic.Pointer[Limits]
	ledger  persistLedger
	// treeWalks lets each user have one walk of a copied tree at a time (plantedBy).
	treeWalks oneWalkEach
	// grepHeld bounds what each user's running searches hold of rg's output; fetchHeld what
	// their WebFetch calls hold of the pages they fetch.
	grepHeld, fetchHeld heldBytes
	// resultsKey names each session's results dir (ResultsDir), new at every start.
	resultsKey [32]byte
}

// NewHost wires the services tools use.
func NewHost(log *zap.Logger, sb *sandbox.Sandbox, cfg config.Sandbox, stateDir string) *Host {
	h := &Host{log: log.Named("host"), sandbox: sb, StateDir: stateDir}
	h.cfg.Store(&cfg)
	_, _ = rand.Read(h.resultsKey[:])
	return h
}

// SetConfig swaps in reloaded confinement settings; executions started afterwards use them.
func (h *Host) SetConfig(cfg config.Sandbox) {
	h.cfg.Store(&cfg)
	h.cfgGen.Add(1)
}

// markOwnResults marks the reads of c's session's own persisted results (a result too long to
// return whole names its file and says to Read it): no read outside the session's dirs, as
// the session's calls see that dir read-only. Both the name and where it leads must lie there.
func (h *Host) markOwnResults(c *Call, paths []permission.PathFact) {
	if len(paths) == 0 {
		return
	}
	dir := h.ResultsDir(c.Session.ID)
	for i := range paths {
		f := &paths[i]
		if f.Access == permission.Read && f.Special == "" && insideDir(f.Requested, dir) && insideDir(f.Resolved, dir) {
			f.OwnResult = true
		}
	}
}

// Sandbox is the confinement every child goes through.
func (h *Host) Sandbox() *sandbox.Sandbox { return h.sandbox }

// ResultsDir is where oversize results of a session are persisted for its owner. Its name is
// keyed by a secret of this daemon's, not the session's id, which other users may learn (ps
// shows sbctl's arguments): the dir's times would tell them when the owner's outputs were
// saved. A restart removes every session's results, so a new key each start loses nothing.
func (h *Host) ResultsDir(sessionID string) string {
	m := hmac.New(sha256.New, h.resultsKey[:])
	m.Write([]byte(sessionID))
	return filepath.Join(h.StateDir, "tool-results", hex.EncodeToString(m.Sum(nil)[:16]))
}

// Spec is the confinement of one execution for a session: as the session's owner (never
// the caller's admin identity, never root), in the session's directories, with the
// configured limits, deny paths and cache dirs. readOnly (a call allowed because it only
// reads) leaves only the private /tmp writable. The session's path rules are enforced too:
// Read denies are hidden, Edit denies and the protected paths are read-only unless an allow
// rule names them. Stdio is left to the tool.
func (h *Host) Spec(s *session.Session, readOnly bool, callID string, argv []string) *sandbox.Spec {
	cfg := h.cfg.Load()
	owner := s.Owner
	home := owner.Home
	if home == "" {
		home = "/"
	}
	writable := append(s.Dirs(), expandHome(cfg.CacheDirs, home)...)
	spec := &sandbox.Spec{
		Path: argv[0], Args: argv[1:],
		Env: h.sessionEnv(s),
		Dir: s.Cwd(),
		UID: owner.UID, GID: owner.GID, Groups: owner.Groups, Tenant: owner.RangeOwner, Umask: s.Umask,
		WritableDirs:      writable,
		DirsLeadTo:        s.LeadsTo(),
		ReadOnlyWorkspace: readOnly,
		ReadOnlyDirs:      []string{h.ResultsDir(s.ID)},
		DenyPaths:         h.denyPaths(cfg, home),
		AllowNetwork:      s.Network == config.NetworkHost,
		AllowUnixSockets:  cfg.AllowUnixSockets,
		Limits: sandbox.Limits{
			MemoryMaxBytes: cfg.MemoryMaxBytes, PidsMax: cfg.PidsMax, CPUQuotaMilli: cfg.CPUQuotaMilli,
			FileSizeMaxBytes: cfg.FileSizeMaxBytes, OpenFilesMax: cfg.OpenFilesMax, TmpSizeBytes: cfg.TmpSizeBytes,
		},
		Session: s.ID,
		Call:    callID,
	}
	rs := s.RuleSet()
	var kp permission.KernelPaths
	if rs != nil {
		kp = rs.KernelPaths(permission.Deny)
	}
	addHidden(spec, kp.Hidden)
	if readOnly {
		return spec
	}
	for _, p := range sandbox.ProtectedCandidates(writable, spec.Dir, owner.Home, s.HomeLeadsTo()) {
		if rs == nil || !rs.EditAllowed(p) {
			spec.ProtectedPaths = append(spec.ProtectedPaths, p)
		}
	}
	spec.ProtectedPatterns = append(spec.ProtectedPatterns, sandbox.ProtectedPatterns(writable, spec.Dir)...)
	addReadOnly(spec, kp.ReadOnly)
	return spec
}

// holdAsks adds the session's ask path rules to spec as if they were denies: a call no person
// approved may not reach what they name by a way its decision did not see (a glob, a recursive
// search, a path an interpreter builds), in any mode. An approved call (its ask answered by a
// person, who saw the command) runs without those that cover a path it names (seen).
func holdAsks(spec *sandbox.Spec, s *session.Session, seen []string) {
	rs := s.RuleSet()
	if rs == nil {
		return
	}
	kp := rs.KernelPaths(permission.Ask)
	addHidden(spec, notCovering(kp.Hidden, seen))
	if !spec.ReadOnlyWorkspace {
		addReadOnly(spec, notCovering(kp.ReadOnly, seen))
	}
}

// notCovering is patterns without those that cover one of paths.
func notCovering(patterns, paths []string) []string {
	if len(paths) == 0 {
		return patterns
	}
	return slices.DeleteFunc(slices.Clone(patterns), func(p string) bool {
		return slices.ContainsFunc(paths, func(n string) bool { return permission.MatchPath(p, n) })
	})
}

// addHidden hides what Read rules' patterns name, in each spelling of their names.
func addHidden(spec *sandbox.Spec, patterns []string) {
	for _, p := range nameForms(patterns) {
		// A literal path goes with the deny paths: landlock also keeps it unreadable if it
		// appears while the call runs.
		if lit, ok := sandbox.LiteralPath(p); ok {
			spec.DenyPaths = append(spec.DenyPaths, lit)
		} else {
			spec.HidePatterns = append(spec.HidePatterns, p)
		}
	}
}

// nameForms are patterns, each in every spelling of its names (permission.NameForms): the
// decision matches a rule in one form, the kernel only the bytes it is given.
func nameForms(patterns []string) []string {
	var out []string
	for _, p := range patterns {
		out = append(out, permission.NameForms(p)...)
	}
	return out
}

// addReadOnly makes what Edit-family rules' patterns name read-only, in each spelling of their
// names; what a wildcard names that the call makes is moved aside when it ends (GuardPatterns).
func addReadOnly(spec *sandbox.Spec, patterns []string) {
	patterns = nameForms(patterns)
	spec.ProtectedPatterns = append(spec.ProtectedPatterns, patterns...)
	for _, p := range patterns {
		if _, ok := sandbox.LiteralPath(p); !ok {
			spec.GuardPatterns = append(spec.GuardPatterns, p)
		}
	}
}

// sessionEnv is a child's environment in session s: ChildEnv, and where the session's egress
// goes through the filtering proxy, the proxy settings programs read.
func (h *Host) sessionEnv(s *session.Session) []string {
	env := ChildEnv(s.Owner, h.cfg.Load().PathAppend)
	if s.Network == config.NetworkProxy && h.ProxyPort > 0 {
		env = append(env, ProxyEnv(h.ProxyPort, h.ProxyCA.javaOptions())...)
		env = append(env, h.ProxyCA.Env()...)
	}
	return env
}

// ProxyCA is the trust a proxied session's programs are given when the proxy intercepts TLS:
// a bundle of the host's roots plus the daemon's interception CA (never the host's own trust
// store, which stays as it is), and the CA alone.
type ProxyCA struct {
	Bundle    string // path of the bundle
	CA        string // path of the CA certificate alone
	JavaStore string // path of the bundle as a PKCS#12 trust store, for Java
}

// JavaStorePassword is the password of ProxyCA.JavaStore: Java's conventional one, as the
// store holds only public certificates.
const JavaStorePassword = "changeit"

// javaOptions points Java at JavaStore (JAVA_TOOL_OPTIONS); "" when unset.
func (p ProxyCA) javaOptions() string {
	if p.JavaStore == "" {
		return ""
	}
	return " -Djavax.net.ssl.trustStore=" + p.JavaStore + " -Djavax.net.ssl.trustStoreType=PKCS12 -Djavax.net.ssl.trustStorePassword=" + JavaStorePassword
}

// Env is the environment that points the usual TLS clients at the bundle; nothing when unset.
// Java reads its trust store from JAVA_TOOL_OPTIONS, which ProxyEnv sets.
func (p ProxyCA) Env() []string {
	if p.Bundle == "" {
		return nil
	}
	b := p.Bundle
	return []string{
		"SSL_CERT_FILE=" + b, "CURL_CA_BUNDLE=" + b, "REQUESTS_CA_BUNDLE=" + b, "GIT_SSL_CAINFO=" + b,
		"PIP_CERT=" + b, "npm_config_cafile=" + b, "CARGO_HTTP_CAINFO=" + b, "AWS_CA_BUNDLE=" + b,
		"DENO_CERT=" + b, "NODE_EXTRA_CA_CERTS=" + p.CA,
	}
}

// ProxyEnv is what a proxied session's programs are told: the usual proxy variables in both
// cases, and the package managers' and Java's own settings (javaExtra: more Java options, its
// trust store when the proxy intercepts TLS). Programs that ignore them have no route out
// anyway.
func ProxyEnv(port int, javaExtra string) []string {
	http := "http://127.0.0.1:" + strconv.Itoa(port)
	socks := "socks5h://127.0.0.1:" + strconv.Itoa(port)
	const noProxy = "localhost,127.0.0.1,::1"
	p := strconv.Itoa(port)
	return []string{
		"HTTP_PROXY=" + http, "http_proxy=" + http, "HTTPS_PROXY=" + http, "https_proxy=" + http,
		"ALL_PROXY=" + socks, "all_proxy=" + socks, "NO_PROXY=" + noProxy, "no_proxy=" + noProxy,
		"npm_config_proxy=" + http, "npm_config_https_proxy=" + http, "PIP_PROXY=" + http,
		"JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=" + p + " -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=" + p + javaExtra,
	}
}

// defaultPath is every child's PATH before sandbox.path_append.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ChildEnv is the whole environment of a child: nothing of the daemon's leaks. pathAppend
// (sandbox.path_append, directories only root can change) comes after the default PATH, so a
// name the system has still runs the system's program.
func ChildEnv(owner session.Caller, pathAppend []string) []string {
	home := owner.Home
	if home == "" {
		home = "/"
	}
	return []string{
		"PATH=" + strings.Join(append([]string{defaultPath}, pathAppend...), ":"),
		"HOME=" + home,
		"USER=" + owner.User,
		"LOGNAME=" + owner.User,
		"LANG=C.UTF-8",
		"TERM=dumb",
		"TMPDIR=/tmp",
		"SHELL=/bin/bash",
	}
}

func expandHome(paths []string, home string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		switch {
		case p == "~":
			p = home
		case strings.HasPrefix(p, "~/"):
			p = filepath.Join(home, p[2:])
		}
		out = append(out, filepath.Clean(p))
	}
	return out
}

// resolveFor resolves path for c's decision as Resolve does, or, for a call its caller runs
// itself, as resolveOnHost does.
func (h *Host) resolveFor(ctx context.Context, c *Call, path string) (resolved, special string, err error) {
	if c.unconfined {
		r, err := h.resolveOnHost(c, path)
		if err != nil {
			return "", "", err
		}
		return r.Resolved, r.Special, nil
	}
	return h.Resolve(ctx, c.Session, path)
}

// resolveOnHost resolves path for a call its caller runs itself, outside any sandbox (an
// agent's hook): as the owner, on the host. The owner's worker looks from the sandbox's view,
// where /tmp and /dev/shm are its own and /proc is its pid namespace's, so there a link the
// agent left in /tmp to a denied file led nowhere, and the agent's own `cat /tmp/link` read it.
// A path through /proc to a process's root, cwd or files is refused: where it leads depends on
// the process that opens it.
func (h *Host) resolveOnHost(c *Call, path string) (*worker.Resolved, error) {
	rs, errs := h.resolveAllOnHost(c, []string{path})
	return rs[0], errs[0]
}

// resolveAllOnHost is resolveOnHost of each path, in one walk as the owner.
func (h *Host) resolveAllOnHost(c *Call, paths []string) ([]*worker.Resolved, []error) {
	o := c.Session.Owner
	var deny []string // looked up once: the walk asks at each step of each path
	if cfg := h.cfg.Load(); cfg != nil {
		deny = h.denyPaths(cfg, o.Home)
	}
	hidden := func(p string) bool { return hiddenIn(deny, p, p, "") == worker.SpecialHidden }
	hps, errs := sandbox.ResolveAllOnHost(o.UID, o.GID, o.Groups, paths, hidden)
	rs := make([]*worker.Resolved, len(paths))
	for i, path := range paths {
		hp, err := hps[i], errs[i]
		switch {
		case errors.Is(err, sandbox.ErrOpenerDependent):
			errs[i] = errcode.Msg(errcode.Validation, fmt.Sprintf("%s: %v; it would be opened outside any sandbox, so it is not decided", path, err))
		case err != nil:
			errs[i] = fmt.Errorf("resolve %s as the session owner: %w", path, err)
		default:
			rs[i] = &worker.Resolved{Resolved: hp.Resolved, Special: hp.Special, Exists: hp.Exists, IsDir: hp.IsDir}
			rs[i].Special = hiddenIn(deny, path, rs[i].Resolved, rs[i].Special)
		}
	}
	return rs, errs
}

// checkTreeUnconfined refuses, for a call its caller runs itself, a read of everything under
// root (grep -r, rg, cp -r's sources, Grep's dir) when something the sandbox hides lies below
// root (deny_paths), and for Bash, when a Read deny rule may match a file below it, as the
// policy holds the agent's own Grep (rules.tree_deny_hit): the agent's program meets no
// sandbox there, and the policy sees only root. A write of everything under root (rm -r, mv,
// cp -al's sources, what a recursive copy lands on) is refused the same way where a Read or
// Edit deny rule may match below: it would remove, change, or give a name no rule covers to
// what the rule protects. In the sandbox the kernel holds those (hidden and read-only mounts).
func (h *Host) checkTreeUnconfined(c *Call, root, tool string, write, unpacked bool) error {
	if !c.unconfined {
		if write {
			return nil
		}
		return h.checkTreeOutside(c, root, tool)
	}
	instead := "run the command in sandboxd (sbctl hook --confine)"
	if c.Tool.Name() != "Bash" {
		instead = "use sandboxd's own " + tool + " (its MCP server, sbctl mcp), which runs it confined"
	}
	verb := "reads"
	if write {
		verb = "writes"
	}
	refuse := func(what string) error {
		return errcode.Msg(errcode.Validation, fmt.Sprintf("%s %s everything under %s, where %s may lie; outside any sandbox it would reach that too: name a directory it does not reach, or %s", tool, verb, root, what, instead))
	}
	if cfg := h.cfg.Load(); cfg != nil {
		for _, d := range h.denyPaths(cfg, c.Session.Owner.Home) {
			if d != root && insideDir(d, root) {
				return refuse(d + ", hidden by the sandbox (deny_paths)")
			}
		}
	}
	if c.Tool.Name() != "Bash" {
		return nil
	}
	pats, err := readDenyPatterns(c, "Bash")
	switch {
	case unpacked:
		// What an archive or a repository puts in place of a file shows nothing of it.
		pats, err = editDenyPatterns(c)
	case write:
		// The write bucket holds the Edit-family deny rules and the Read ones.
		pats, err = pathPatterns(c, "deny", "write")
	}
	if err != nil {
		return err
	}
	pat, err := denyBelow(pats, root, tool, func(string) bool { return true })
	if err != nil || pat == "" {
		return err
	}
	return refuse("what the deny pattern " + pat + " names")
}

// editDenyPatterns are the session's Edit-family deny patterns (Edit, Write, MultiEdit,
// NotebookEdit), without the Read ones the write bucket also holds.
func editDenyPatterns(c *Call) ([]string, error) {
	return pathPatternsOf(c, "deny", func(rule map[string]any) bool { return rule["tool"] != "Read" }, "write")
}

// mentionReads reports whether the session has a Read deny or ask rule that only the decision
// holds outside its dirs (permission.DecidedOnlyOutside): `awk 1 ~/other/id.key` under
// Read(**/*.key) reads a file no mount hides, so the words of a command no table describes
// are looked up as paths it may read (classifier.Options.MentionReads). Rule data it cannot
// read counts as such a rule.
func mentionReads(c *Call) bool {
	dirs := append([]string{c.Session.Cwd()}, c.Session.Dirs()...)
	for _, behavior := range []string{"deny", "ask"} {
		pats, err := readPatterns(c, behavior, "Bash")
		if err != nil {
			return true
		}
		for _, p := range pats {
			if permission.DecidedOnlyOutside(p, dirs) {
				return true
			}
		}
	}
	return false
}

// denyBelow is the first of pats that consider accepts and that may match a file below root,
// or "".
func denyBelow(pats []string, root, tool string, consider func(pat string) bool) (string, error) {
	segs := permission.SplitPath(root)
	b := permission.NewMatchBudget()
	for _, pat := range pats {
		if !consider(pat) {
			continue
		}
		below, err := permission.MayMatchBelowWithin(pat, segs, b)
		if err != nil {
			return "", errcode.Msg(errcode.Validation, fmt.Sprintf("%s reaches everything under %s, and the deny rules are too many to check against it", tool, root))
		}
		if below {
			return pat, nil
		}
	}
	return "", nil
}

// checkTreeOutside refuses a confined Bash command that reads everything under root, a dir
// outside the session's dirs, where a Read deny pattern the kernel leaves to the decision there
// (permission.DecidedOnlyOutside: Read(**/*.key)) may name a file: the decision sees the dir,
// not the files the command reads in it (`grep -r SECRET ~/other`).
func (h *Host) checkTreeOutside(c *Call, root, tool string) error {
	if c.Tool.Name() != "Bash" {
		return nil
	}
	dirs := append([]string{c.Session.Cwd()}, c.Session.Dirs()...)
	for _, d := range dirs {
		if insideDir(root, d) {
			return nil
		}
	}
	pats, err := readDenyPatterns(c, "Bash")
	if err != nil {
		return err
	}
	pat, err := denyBelow(pats, root, tool, func(pat string) bool { return permission.DecidedOnlyOutside(pat, dirs) })
	if err != nil || pat == "" {
		return err
	}
	return errcode.Msg(errcode.Validation, fmt.Sprintf("%s reads everything under %s, outside the session's directories, where only this decision holds the Read deny pattern %s, and cannot see which files it reads: read a directory the pattern cannot reach, or write the rule from the place it protects", tool, root, pat))
}

// resolveAsOwner resolves path as the session owner with how, through the owner's worker, for
// the facts a decision is made on; for a call its caller runs itself, as resolveOnHost does.
func (h *Host) resolveAsOwner(ctx context.Context, c *Call, path string, how func(*worker.Client) (*worker.Resolved, error)) (*worker.Resolved, error) {
	if c.unconfined {
		return h.resolveOnHost(c, path)
	}
	s := c.Session
	var r *worker.Resolved
	err := h.withWorker(ctx, s, func(w *worker.Client) error {
		var err error
		r, err = how(w)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("resolve %s as the session owner: %w", path, err)
	}
	r.Special = h.hiddenSpecial(s, path, r.Resolved, r.Special)
	return r, nil
}

// hiddenSpecial is special, or "hidden" when path (as asked for, or resolved) is one the
// sandbox hides from every call of s: the configured deny_paths and the daemon's own (see
// denyPaths). The worker recognises a hidden file by the null device bound over it, but
// inside a hidden directory it sees an empty, unreadable tmpfs, where a file looks missing
// and a read of it would be allowed. A caller that acts on the decision itself (sbctl hook,
// which leaves the read to the agent, outside any sandbox) would then read ~/.ssh/id_rsa:
// the policy must see it as hidden, and deny it in every mode, as deny_paths promise.
func (h *Host) hiddenSpecial(s *session.Session, path, resolved, special string) string {
	cfg := h.cfg.Load()
	if special != "" || cfg == nil {
		return special
	}
	return hiddenIn(h.denyPaths(cfg, s.Owner.Home), path, resolved, special)
}

// hiddenIn is hiddenSpecial with the hidden paths given (denyPaths).
func hiddenIn(deny []string, path, resolved, special string) string {
	if special != "" {
		return special
	}
	clean := filepath.Clean(path)
	for _, d := range deny {
		if insideDir(clean, d) || insideDir(resolved, d) {
			return worker.SpecialHidden
		}
	}
	return special
}

// ResolveInfo resolves path as the session owner, through the owner's worker.
func (h *Host) ResolveInfo(ctx context.Context, s *session.Session, path string) (*worker.Resolved, error) {
	var r *worker.Resolved
	err := h.withWorker(ctx, s, func(w *worker.Client) error {
		var err error
		r, err = w.ResolveInfo(ctx, path)
		return err
	})
	if err == nil && !r.Exists {
		return nil, errcode.New(errcode.ErrnoENOENT, fmt.Errorf("%s does not exist", path))
	}
	return r, err
}

// DirInside resolves p as the session owner and reports an error unless it is a directory
// inside one of dirs (resolved the same way): a cwd must not reach outside the session's
// directories through a symlink or `..`. It returns the resolved path.
func (h *Host) DirInside(ctx context.Context, s *session.Session, p string, dirs []string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", errcode.New(errcode.Validation, fmt.Errorf("%q is not an absolute path", p))
	}
	info, err := h.ResolveInfo(ctx, s, filepath.Clean(p))
	if err != nil {
		return "", errcode.New(errcode.Validation, fmt.Errorf("%s is not usable by uid %d: %w", p, s.Owner.UID, err))
	}
	if !info.IsDir {
		return "", errcode.New(errcode.Validation, fmt.Errorf("%s is not a directory", p))
	}
	// Each dir where it led when it was given (Session.LeadsTo), not where it leads now: a dir
	// swapped for a link while the command ran must not make a cwd in the link's tree inside.
	leads := s.LeadsTo()
	for _, d := range dirs {
		to, ok := leads[d]
		if !ok {
			r, err := h.ResolveInfo(ctx, s, d)
			if err != nil {
				continue
			}
			to = r.Resolved
		}
		if session.Within(info.Resolved, to) {
			return info.Resolved, nil
		}
	}
	return "", errcode.New(errcode.Validation, fmt.Errorf("%s is outside the session's directories", p))
}

// explainHidden adds the reason to a tool's permission error on a path under a deny path: the
// confined worker only sees EACCES there, which reads like a file mode problem.
//
// Likewise a write refused on a protected path (read-only, a mount point that cannot be
// replaced: EROFS or EBUSY) says which protection refused it and how to lift it.
func (h *Host) explainHidden(c *Call, err error) error {
	if h == nil || c == nil || c.Session == nil {
		return err
	}
	path := c.Input.String("file_path")
	if path == "" {
		path = c.Input.String("path")
	}
	cfg := h.cfg.Load()
	if path == "" || cfg == nil {
		return err
	}
	path = expandPath(c, path)
	if errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EBUSY) {
		for _, p := range sandbox.ProtectedCandidates(c.Session.Dirs(), c.Session.Cwd(), c.Session.Owner.Home, c.Session.HomeLeadsTo()) {
			if insideDir(path, p) {
				return errcode.New(errcode.Of(err), fmt.Errorf("%w (%s is protected: programs outside the sandbox run or trust it, so it is read-only in every session; a session with an allow rule naming it, e.g. --allow 'Edit(%s)', may write it)", err, p, p))
			}
		}
		return err
	}
	if !errors.Is(err, fs.ErrPermission) {
		return err
	}
	for _, d := range h.denyPaths(cfg, c.Session.Owner.Home) {
		if insideDir(path, d) {
			return errcode.New(errcode.Of(err), fmt.Errorf("%w (the sandbox hides %s from every session: deny_paths in the daemon's configuration)", err, d))
		}
	}
	return err
}

// denyPaths are the configured deny paths for this owner plus the daemon's own: its socket
// (a command that reached it could loosen its own session) and its audit log and signing key
// (which a root caller's commands could otherwise read). The session's persisted results,
// also under the state dir, stay reachable. Only paths that exist belong here: a missing deny
// path costs a root caller landlock rules for every entry of each of its ancestors.
func (h *Host) denyPaths(cfg *config.Sandbox, home string) []string {
	deny := expandHome(cfg.DenyPaths, home)
	if h.DaemonSocket != "" {
		deny = append(deny, h.DaemonSocket)
	}
	if h.StateDir != "" {
		deny = append(deny, filepath.Join(h.StateDir, "audit"))
	}
	return append(deny, h.SecretDirs...)
}
