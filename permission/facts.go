package permission

import "github.com/sandboxd/sandboxd/classifier"

// Access is how a tool touches a path.
type Access string

// Path accesses a tool declares.
const (
	Read  Access = "read"
	Write Access = "write"
)

// PathFact is one path a call touches, resolved (symlinks, `..`, `~`) as the session owner.
type PathFact struct {
	// Requested is the path as the call gave it, made absolute.
	Requested string `json:"requested"`
	// Resolved is the real path after following symlinks as the owner; for a path that does not
	// exist yet, its deepest existing parent resolved plus the rest.
	Resolved string `json:"resolved"`
	Access   Access `json:"access"`
	// Special is set for device, FIFO, socket and /proc paths that are never read.
	Special string `json:"special,omitempty"`
	// Redirect marks a Bash redirection's target: a Bash allow rule covers the paths its
	// command names, but a redirect is a write of its own that needs an Edit allow (COMPAT 1).
	Redirect bool `json:"redirect,omitempty"`
	// Alternative marks a read that happens here or at another of the call's alternative paths
	// (classifier.PathUse.Alternative): the rules meet it, but alone it is no read outside the
	// session's directories.
	Alternative bool `json:"alternative,omitempty"`
	// Tree marks a read of everything under the path (grep -r, rg) by a program its caller
	// runs itself: an ask rule that may match below it holds it, as for the caller's own Grep.
	Tree bool `json:"tree,omitempty"`
	// Aliases are the path's names through a link at the literal start of a deny or ask path
	// rule (`Read(./cfg/**)` with cfg a link to ~/realcfg names ~/realcfg/x as ./cfg/x). The
	// rules meet them as they meet Requested and Resolved; an allow must cover them too; they
	// are no read or write of their own (a rule's link may lie outside the session's dirs).
	Aliases []string `json:"aliases,omitempty"`
	// OwnResult marks a read of the session's own persisted results (a long output the result
	// named): no read outside the session's dirs, as its other files are not; the rules still
	// meet it.
	OwnResult bool `json:"own_result,omitempty"`
}

// ToolFacts is what a tool's CheckPermissions step reports about one call, for the policy.
type ToolFacts struct {
	Paths  []PathFact                 `json:"paths,omitempty"`
	Bash   *classifier.Classification `json:"bash,omitempty"`
	Domain string                     `json:"domain,omitempty"`
	// AllowedDomain is the network.allowed_domains entry Domain matches, "" for none: the
	// admin's host-level allow, which the proxy honours, counts for a WebFetch decision too.
	AllowedDomain string `json:"allowed_domain,omitempty"`
	// HTTP is the request's method and path when they can be seen (plain HTTP through the
	// proxy, WebFetch's own requests); nil for a tunnel (CONNECT, SOCKS), which is decided by
	// its host alone.
	HTTP *HTTPFact `json:"http,omitempty"`
}

// HTTPFact is the visible part of one HTTP request, for WebFetch(METHOD host/path) rules.
type HTTPFact struct {
	Method string `json:"method"`
	// Path is decoded and otherwise as sent, dot segments included: MatchWeb reads it as the
	// servers that may act on it do.
	Path string `json:"path"`
}

// Caller is the kernel-reported identity (SO_PEERCRED) of the session owner.
type Caller struct {
	UID  uint32 `json:"uid"`
	GID  uint32 `json:"gid"`
	User string `json:"user,omitempty"`
}

// HookVerdict is the merged PreToolUse hook answer for a call, if any hook answered.
type HookVerdict struct {
	// Decision is allow, deny, ask or defer (COMPAT 4); anything else is ignored.
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// Facts is everything Go gathers about one call for the policy: the Rego decides, Go only
// reports. Paths in ToolFacts are already resolved as the session owner.
type Facts struct {
	Tool  string         `json:"tool"`
	Input map[string]any `json:"input"`
	// Mode is the effective mode of this call (session mode or the call's own).
	Mode   Mode   `json:"mode"`
	Caller Caller `json:"caller"`
	// Cwd is the session's current directory; Dirs its additional directories (the session's;
	// the settings' additionalDirectories are added by the engine from the RuleSet). Together
	// they are the session's directories for acceptEdits and safety checks.
	Cwd  string   `json:"cwd"`
	Dirs []string `json:"dirs,omitempty"`
	Home string   `json:"home"`
	// ReadOnly is the tool's own claim that this call only reads (Read, Glob, Grep; for Bash the
	// classification decides).
	ReadOnly bool `json:"read_only"`
	ToolFacts
	Hook *HookVerdict `json:"hook,omitempty"`
	// RequiresUserInteraction marks calls that are never auto-approved (AskUserQuestion, MCP
	// tools with _meta["anthropic/requiresUserInteraction"]).
	RequiresUserInteraction bool `json:"requires_user_interaction,omitempty"`
	// Unconfined marks a call its caller runs itself, outside any sandbox (a decide for an
	// agent's hook): no mount or landlock rule then holds a path the facts do not name.
	Unconfined bool `json:"unconfined,omitempty"`
	// CacheDirs are the daemon's cache_dirs for the owner (an unconfined call's only): writable
	// in every confined call, so no write there is one the kernel would refuse.
	CacheDirs []string `json:"cache_dirs,omitempty"`
}
