package permission

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"path"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// Effective is what the settings sources add up to besides the rules.
type Effective struct {
	// DefaultMode is the strongest source's defaultMode (default when none, or when the one
	// given is disabled by admin policy).
	DefaultMode Mode `json:"default_mode"`
	// AdditionalDirectories merges every source's directories, made absolute.
	AdditionalDirectories []string `json:"additional_directories,omitempty"`
	// DisableBypass and DisableAuto forbid those modes (admin: disableBypassPermissionsMode,
	// disableAutoMode = "disable"); any source may set them since they only restrict.
	DisableBypass bool `json:"disable_bypass,omitempty"`
	DisableAuto   bool `json:"disable_auto,omitempty"`
	// ManagedRulesOnly (allowManagedPermissionRulesOnly) drops allow rules of every source but
	// policySettings; lower deny and ask rules stay since they only restrict.
	ManagedRulesOnly bool `json:"managed_rules_only,omitempty"`
	// Files lists the settings files read, in precedence order.
	Files []string `json:"files,omitempty"`
	// Warnings lists rules or settings that were dropped or changed, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// ResolveMode checks a requested mode against admin policy.
func (e Effective) ResolveMode(m Mode) (Mode, error) {
	if m == "" {
		m = e.DefaultMode
	}
	if m == "" {
		m = ModeDefault
	}
	if _, err := ParseMode(string(m)); err != nil {
		return "", err
	}
	if (m == ModeBypassPermissions && e.DisableBypass) || (m == ModeAuto && e.DisableAuto) {
		return "", fmt.Errorf("mode %s: %w", m, ErrModeDisabled)
	}
	return m, nil
}

// RuleSet is a session's rules from every source, strongest source first, plus the
// effective settings. It is immutable; build a new one when rules change.
type RuleSet struct {
	rules   []Rule
	eff     Effective
	anchors Anchors
	data    map[string]any
	digest  string
}

// NewRuleSet orders rules by source precedence (stable within a source) and precomputes the
// data the policy reads: rules grouped by behavior, tool and first word, path patterns made
// absolute with a (home, cwd). Path rules whose anchor is unknown are widened to any depth for
// deny/ask (failing closed) and dropped for allow, each with a warning. So are the allow path
// rules agents ignore (ignoredAllow).
func NewRuleSet(rules []Rule, eff Effective, a Anchors) *RuleSet {
	rs := &RuleSet{rules: make([]Rule, 0, len(rules)), eff: eff, anchors: a}
	rs.eff.Warnings = append([]string(nil), eff.Warnings...)
	for _, r := range rules {
		if ignoredAllow(r) {
			rs.eff.Warnings = append(rs.eff.Warnings, fmt.Sprintf("%s (%s): agents ignore %s path rules, so this allow is dropped; use Edit(...) or Read(...)", r, r.Origin, r.Tool))
			continue
		}
		rs.rules = append(rs.rules, r)
	}
	sort.SliceStable(rs.rules, func(i, j int) bool { return rs.rules[i].Source.Rank() < rs.rules[j].Source.Rank() })
	rs.data = rs.build()
	// The digest keys decision caches, so it covers everything a decision reads from the
	// RuleSet: the rule data and the settings' directories (they widen the session's).
	b, _ := json.Marshal([]any{rs.data, rs.eff.AdditionalDirectories})
	sum := sha256.Sum256(b)
	rs.digest = hex.EncodeToString(sum[:])
	return rs
}

// Rules returns the rules, strongest source first.
func (rs *RuleSet) Rules() []Rule { return append([]Rule(nil), rs.rules...) }

// Effective returns the effective settings.
func (rs *RuleSet) Effective() Effective { return rs.eff }

// Digest identifies the rule data; equal digests mean equal decisions for equal facts.
func (rs *RuleSet) Digest() string { return rs.digest }

// Data is the rule data as the Rego reads it (input.rules). Treat it as read-only.
func (rs *RuleSet) Data() map[string]any { return rs.data }

// WriteTable writes the effective rules with behavior, source and origin, for `sbctl policy show`.
func (rs *RuleSet) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BEHAVIOR\tRULE\tSOURCE\tORIGIN")
	for _, b := range []Behavior{Deny, Ask, Allow} {
		for _, r := range rs.rules {
			if r.Behavior == b {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Behavior, r, r.Source, r.Origin)
			}
		}
	}
	fmt.Fprintf(tw, "\ndefault mode: %s\n", rs.eff.DefaultMode)
	if len(rs.eff.AdditionalDirectories) > 0 {
		fmt.Fprintf(tw, "additional directories: %s\n", strings.Join(rs.eff.AdditionalDirectories, ", "))
	}
	for _, wn := range rs.eff.Warnings {
		fmt.Fprintf(tw, "warning: %s\n", wn)
	}
	return tw.Flush()
}

type bucket struct {
	tools   map[string][]any
	globs   []any
	words   map[string][]any
	other   []any
	paths   map[string][]any
	domains []any
	web     []any
	params  map[string][]any
}

func newBucket() *bucket {
	return &bucket{tools: map[string][]any{}, words: map[string][]any{}, paths: map[string][]any{"read": {}, "write": {}}, params: map[string][]any{}}
}

func (b *bucket) value() map[string]any {
	return map[string]any{
		"tools":   b.tools,
		"globs":   nonNil(b.globs),
		"bash":    map[string]any{"word": b.words, "other": nonNil(b.other)},
		"paths":   b.paths,
		"domains": nonNil(b.domains),
		"web":     nonNil(b.web),
		"params":  b.params,
	}
}

func nonNil(x []any) []any {
	if x == nil {
		return []any{}
	}
	return x
}

// BashIndexWord is the word a Bash rule pattern is indexed under: its literal first word, or ""
// when the first word holds a wildcard. The policy looks rules up by the command's first word
// (text up to the first space), so a pattern is only skipped when it could not match anyway.
func BashIndexWord(pattern string) string {
	w, _, _ := strings.Cut(pattern, " ")
	if strings.Contains(w, "*") {
		return ""
	}
	return w
}

func (rs *RuleSet) build() map[string]any {
	buckets := map[Behavior]*bucket{Allow: newBucket(), Deny: newBucket(), Ask: newBucket()}
	for _, r := range rs.rules {
		b := buckets[r.Behavior]
		if b == nil {
			continue
		}
		// reason is the decision's reason when this rule decides, built once per rule set
		// here rather than by the policy on every decision.
		item := map[string]any{"rule": r.String(), "source": string(r.Source), "origin": r.Origin, "kind": string(r.Kind), "tool": r.Tool,
			"reason": fmt.Sprintf("%s rule %s (%s)", r.Behavior, r, r.Source)}
		switch r.Kind {
		case KindAll:
			for _, t := range coveredTools(r) {
				b.tools[t] = append(b.tools[t], item)
			}
		case KindTool:
			item["pattern"] = r.Pattern
			b.globs = append(b.globs, item)
		case KindBash:
			pats := []string{r.Pattern}
			if r.Behavior != Allow {
				if u, ok := shellUnquote(r.Pattern); ok && u != r.Pattern && strings.TrimSpace(u) != "" {
					// Commands are matched as words, their quotes removed, so a deny rule
					// written as the command is typed (Bash(rm "my file")) matched nothing:
					// it matches as written and with its quotes removed. Allow rules keep
					// their one reading; remembered rules are written as unquoted words.
					pats = append(pats, u)
				}
			}
			for i, pat := range pats {
				it := item
				if i > 0 {
					it = maps.Clone(item)
				}
				it["pattern"] = pat
				if w := BashIndexWord(pat); w != "" {
					b.words[w] = append(b.words[w], it)
				} else {
					b.other = append(b.other, it)
				}
			}
		case KindDomain:
			item["pattern"] = r.Pattern
			b.domains = append(b.domains, item)
		case KindWeb:
			item["pattern"], item["method"], item["path"] = r.Pattern, r.Method, r.URLPath
			b.web = append(b.web, item)
		case KindParam:
			item["pattern"], item["param"] = r.Pattern, r.Param
			b.params[r.Tool] = append(b.params[r.Tool], item)
		case KindPath:
			// One item per name of what the rule is about: a rule anchored at a dir
			// reached through a link also holds where the link leads (AbsPatterns).
			pats, ok := r.AbsPatterns(rs.anchors)
			if !ok {
				if r.Behavior == Allow {
					rs.eff.Warnings = append(rs.eff.Warnings, fmt.Sprintf("%s (%s): anchor directory unknown; allow rule dropped", r, r.Origin))
					continue
				}
				rs.eff.Warnings = append(rs.eff.Warnings, fmt.Sprintf("%s (%s): anchor directory unknown; widened to any depth", r, r.Origin))
				pats = []string{"/**/" + r.Pattern}
			}
			for i, pat := range pats {
				it := item
				if i > 0 {
					it = maps.Clone(item)
				}
				it["pattern"] = pat
				for _, k := range pathBuckets(r) {
					b.paths[k] = append(b.paths[k], it)
				}
			}
		}
	}
	return map[string]any{
		"allow": buckets[Allow].value(),
		"deny":  buckets[Deny].value(),
		"ask":   buckets[Ask].value(),
		"admin": map[string]any{"disable_bypass": rs.eff.DisableBypass, "disable_auto": rs.eff.DisableAuto},
		"count": len(rs.rules),
	}
}

// ignoredAllow reports an allow path rule of a tool whose path rules agents ignore (COMPAT 1:
// Write, NotebookEdit, Glob, MultiEdit). Honoured, it would allow what the agent asks about;
// the deny and ask rules of those tools are kept, since they only narrow.
func ignoredAllow(r Rule) bool {
	if r.Behavior != Allow || r.Kind != KindPath {
		return false
	}
	switch r.Tool {
	case "Write", "NotebookEdit", "Glob", "MultiEdit":
		return true
	}
	return false
}

// coveredTools lists the tools a bare tool rule applies to: Edit rules govern every writing
// file tool and an Edit allow also grants reads; Read rules cover Glob and Grep, and a Read
// deny or ask also blocks the writing tools (COMPAT 1, NotebookEdit included to fail closed).
func coveredTools(r Rule) []string {
	writers := []string{"Edit", "Write", "MultiEdit", "NotebookEdit"}
	readers := []string{"Read", "Glob", "Grep"}
	switch {
	case r.Tool == "Edit" && r.Behavior == Allow:
		return append(writers, readers...)
	case r.Tool == "Edit":
		return writers
	case r.Tool == "Read" && r.Behavior == Allow:
		return readers
	case r.Tool == "Read":
		return append(readers, writers...)
	case r.Tool == "Write" && r.Behavior != Allow:
		return writers
	}
	return []string{r.Tool}
}

// pathBuckets says which path facts a path rule applies to (COMPAT 1): Read rules cover reads
// by any tool, and a Read deny also blocks writes; Edit-family rules cover writes and an Edit
// allow also grants reads; Glob and Grep rules apply to their own tool only.
func pathBuckets(r Rule) []string {
	switch r.Tool {
	case "Read":
		if r.Behavior == Allow {
			return []string{"read"}
		}
		return []string{"read", "write"}
	case "Edit":
		if r.Behavior == Allow {
			return []string{"write", "read"}
		}
		return []string{"write"}
	case "Glob", "Grep":
		return []string{r.Tool}
	default: // Write, MultiEdit, NotebookEdit
		return []string{"write"}
	}
}

// KernelPaths is what of a rule set's path rules the sandbox enforces in a child, as absolute
// patterns (MatchPath syntax): Hidden from Read rules, ReadOnly from Edit-family rules. A rule
// whose anchor is unknown is widened to any depth, as for the policy.
type KernelPaths struct {
	Hidden, ReadOnly []string
}

// KernelPaths lists the patterns of the path rules of behavior b (Deny: in every child; Ask: in
// every child no person approved) that the sandbox turns into hidden and read-only paths.
func (rs *RuleSet) KernelPaths(b Behavior) KernelPaths {
	var k KernelPaths
	for _, r := range rs.rules {
		if r.Behavior != b || r.Kind != KindPath {
			continue
		}
		abs, ok := r.AbsPattern(rs.anchors)
		if !ok {
			abs = "/**/" + r.Pattern
		}
		switch r.Tool {
		case "Read":
			k.Hidden = append(k.Hidden, abs)
		case "Edit", "Write", "MultiEdit", "NotebookEdit":
			k.ReadOnly = append(k.ReadOnly, abs)
		}
	}
	return k
}

// EditAllowed reports whether an Edit-family allow rule names p explicitly (it matches p and
// spells p's last name, so `Edit(.git/config)` does and `Edit(**)` does not): such a rule lifts
// the kernel's protection of a protected path (a session made for repository administration).
func (rs *RuleSet) EditAllowed(p string) bool {
	for _, r := range rs.rules {
		if r.Behavior != Allow || r.Kind != KindPath || r.Tool == "Read" || r.Tool == "Glob" || r.Tool == "Grep" {
			continue
		}
		if abs, ok := r.AbsPattern(rs.anchors); ok && MatchPath(abs, p) && strings.HasSuffix(abs, "/"+path.Base(p)) {
			return true
		}
	}
	return false
}

// WebRule is the first WebFetch(METHOD host/path) rule, strongest source first, of one of
// behaviors whose host pattern matches host: a rule about that host's requests, which a tunnel
// to it, showing only the host, may carry. ok is false when there is none.
func (rs *RuleSet) WebRule(host string, behaviors ...Behavior) (r Rule, ok bool) {
	for _, r := range rs.rules {
		if r.Kind == KindWeb && slices.Contains(behaviors, r.Behavior) && MatchDomain(r.Pattern, host) {
			return r, true
		}
	}
	return Rule{}, false
}

// DecidesHosts reports whether some WebFetch deny or ask rule holds hosts back: then a host
// that cannot be matched against the rules is not one to let through.
func (rs *RuleSet) DecidesHosts() bool {
	for _, r := range rs.rules {
		if r.Tool == "WebFetch" && (r.Behavior == Deny || r.Behavior == Ask) {
			return true
		}
	}
	return false
}

// HoldsAddresses reports whether some WebFetch deny or ask rule names an IP address, which
// also holds the names that resolve to it.
func (rs *RuleSet) HoldsAddresses() bool {
	for _, r := range rs.rules {
		if r.Tool == "WebFetch" && (r.Behavior == Deny || r.Behavior == Ask) {
			if _, err := netip.ParseAddr(strings.Trim(r.Pattern, "[]")); err == nil {
				return true
			}
		}
	}
	return false
}

// Anchors is the (home, cwd) the rule set's path patterns were made absolute with.
func (rs *RuleSet) Anchors() Anchors { return rs.anchors }

// shellUnquote removes a pattern's shell quoting as the shell removes a command's: '...' is
// literal, "..." keeps all but \$ \` \" \\, and a backslash outside quotes escapes the next
// character. ok is false for an unterminated quote or a trailing backslash.
func shellUnquote(p string) (string, bool) {
	if !strings.ContainsAny(p, `"'\`) {
		return p, true
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\\':
			if i+1 == len(p) {
				return "", false
			}
			i++
			b.WriteByte(p[i])
		case '\'':
			j := strings.IndexByte(p[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(p[i+1 : i+1+j])
			i += j + 1
		case '"':
			for i++; ; i++ {
				if i == len(p) {
					return "", false
				}
				if p[i] == '"' {
					break
				}
				if p[i] == '\\' && i+1 < len(p) && strings.IndexByte("$`\"\\", p[i+1]) >= 0 {
					i++
				}
				b.WriteByte(p[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// Narrows reports whether next, built for the same session after old, takes something away: a
// deny or ask rule old did not hold (its text, source and anchor), an allow rule old held that
// it does not, a mode it forbids that old allowed, the allow rules of all but the admin's
// dropped, or a settings directory gone. What a session runs was decided under old.
func Narrows(old, next *RuleSet) bool {
	key := func(r Rule) string {
		return string(r.Behavior) + "\x00" + r.String() + "\x00" + string(r.Source) + "\x00" + r.Root
	}
	had := make(map[string]bool, len(old.rules))
	for _, r := range old.rules {
		had[key(r)] = true
	}
	has := make(map[string]bool, len(next.rules))
	for _, r := range next.rules {
		k := key(r)
		has[k] = true
		if r.Behavior != Allow && !had[k] {
			return true
		}
	}
	for _, r := range old.rules {
		if r.Behavior == Allow && !has[key(r)] {
			return true
		}
	}
	o, n := old.eff, next.eff
	return n.DisableBypass && !o.DisableBypass || n.DisableAuto && !o.DisableAuto || n.ManagedRulesOnly && !o.ManagedRulesOnly ||
		slices.ContainsFunc(o.AdditionalDirectories, func(d string) bool { return !slices.Contains(n.AdditionalDirectories, d) })
}
