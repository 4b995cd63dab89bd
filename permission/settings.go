package permission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/internal/regfile"
)

// Settings is the "permissions" object of a settings file ({"permissions":{...}}), and the
// shape of rules given on the command line or at session create/change.
type Settings struct {
	Allow                 []string `json:"allow,omitempty"`
	Deny                  []string `json:"deny,omitempty"`
	Ask                   []string `json:"ask,omitempty"`
	DefaultMode           string   `json:"defaultMode,omitempty"`
	AdditionalDirectories []string `json:"additionalDirectories,omitempty"`
	// DisableBypassPermissionsMode and DisableAutoMode take "disable".
	DisableBypassPermissionsMode string `json:"disableBypassPermissionsMode,omitempty"`
	DisableAutoMode              string `json:"disableAutoMode,omitempty"`
	// AllowManagedPermissionRulesOnly is honoured from policySettings only.
	AllowManagedPermissionRulesOnly bool `json:"allowManagedPermissionRulesOnly,omitempty"`
}

// settingsFile is the file shape. Other top-level keys (hooks, env, ...) belong to other
// readers and are ignored; unknown keys inside "permissions" are an error, because a typo such
// as "denny" would otherwise drop deny rules silently.
type settingsFile struct {
	Permissions *json.RawMessage `json:"permissions"`
}

// SettingsError locates a bad settings file or rule.
type SettingsError struct {
	File string
	Line int // 0 when unknown
	Err  error
}

func (e *SettingsError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *SettingsError) Unwrap() error { return e.Err }

// FileReader reads a file; the caller passes one that reads as the session owner, so project
// and user files are never opened with the daemon's privileges.
type FileReader interface {
	ReadFile(ctx context.Context, path string) ([]byte, error)
}

// OwnedFileReader is a FileReader that also says whose a file is: a project's settings are
// trusted (TrustProject) only from a file of the session's owner that no one else may change,
// and the user's only from such a file too. A reader that cannot say leaves a project's
// untrusted (and the user's as they are).
type OwnedFileReader interface {
	// ReadOwnedFile reads path and says whose it is: uid is its owner's, or that of a name on
	// the way to it from top (a dir holding it, top included, or a link) that is another's;
	// shared, when not "", says how another user may change what it holds (a name of
	// theirs, a file or dir writable by a group or by others, or through an ACL), or that this
	// could not be ruled out.
	ReadOwnedFile(ctx context.Context, path, top string) (b []byte, uid uint32, shared string, err error)
}

// LoadOptions says where a session's rules come from.
type LoadOptions struct {
	// PolicyDir holds admin *.json (policySettings), e.g. /etc/sandboxd/policy.d; "" skips it.
	// Files there are read by the daemon and must be root-owned and not writable by others.
	PolicyDir string
	// CLIArgs and Session are rules given on the daemon command line and at session create/change.
	CLIArgs, Session *Settings
	// Cwd is the session's starting directory, ProjectRoot its project (settings root), Home the
	// owner's home. All absolute.
	Cwd, ProjectRoot, Home string
	// CwdLeadsTo and HomeLeadsTo are where Cwd (and ProjectRoot, the same dir) and Home lead,
	// resolved as the owner; "" when unknown (Anchors).
	CwdLeadsTo, HomeLeadsTo string
	// Inherited are the rules of a sub-agent's parent chain (RuleSet.Inheritable of its
	// parent's rule set), added to what the sources give, each with the source it had there.
	Inherited []Rule
	// Owner reads project and user files as the session owner; nil skips those sources.
	Owner FileReader
	// ReadClaudeSettings also reads .claude/settings.json, .claude/settings.local.json and
	// ~/.claude/settings.json permissions.
	ReadClaudeSettings bool
	// TrustProject lets project and local files add allow rules and directories (COMPAT 2:
	// an untrusted workspace's deny and ask apply, its allow waits for trust).
	TrustProject bool
	// OwnerUID is the session owner's uid: project and local files of another user, root
	// included, or that another user may write, are not trusted, whatever TrustProject says
	// (a shared dir where anyone may write .sandboxd/); nor are such user files.
	OwnerUID uint32
	// InsecureSkipOwnerCheck skips the root-ownership check of PolicyDir. Tests only.
	InsecureSkipOwnerCheck bool
	// MaxOwnedEntries bounds the entries (allow, deny, ask and additionalDirectories) of the
	// sources the session's owner controls, Session and the project, local and user files,
	// all together; 0 is DefaultMaxOwnedEntries. Past it Load fails naming the file (or
	// "session") that went over, before that source's rules are built. A caller with a
	// lower bound of its own on the rules may pass it, to refuse them before any is built.
	MaxOwnedEntries int
}

// DefaultMaxOwnedEntries is LoadOptions.MaxOwnedEntries when it is 0: as many as one settings
// file may hold (MaxSettingsEntries), so a session's owner makes the daemon build no more rules
// for it than one file could, however many sources it fills. A daemon that allows a session
// more rules than that must pass its own bound.
const DefaultMaxOwnedEntries = MaxSettingsEntries

type sourceFile struct {
	src  Source
	path string
	root string // anchor of /p patterns
	// top is the dir up to which no one but the owner may change the names on the way to
	// path: the project's, or the owner's home.
	top string
}

// Load reads every source in precedence order and returns the session's RuleSet. A file that
// does not exist is skipped; one that does not parse, or holds a malformed rule, is an error
// with file, line and why (a session must not start on half its rules).
func Load(ctx context.Context, o LoadOptions) (*RuleSet, *Effective, error) {
	var (
		rules []Rule
		eff   = Effective{DefaultMode: ""}
		modes []string
	)
	maxOwned := o.MaxOwnedEntries
	if maxOwned <= 0 {
		maxOwned = DefaultMaxOwnedEntries
	}
	ownedEntries := 0
	add := func(name string, src Source, root string, s Settings, lines map[string][]int) error {
		if src != SourcePolicy && src != SourceCLI {
			// Counted before any is parsed: the owner's sources are read one by one, each
			// under its own bound, and together they must not add up to more.
			if ownedEntries += len(s.Allow) + len(s.Deny) + len(s.Ask) + len(s.AdditionalDirectories); ownedEntries > maxOwned {
				return &SettingsError{File: name, Err: fmt.Errorf("%w: with this source the session's own settings list %d entries (allow, deny, ask and additionalDirectories), over the bound of %d", ErrBadSettings, ownedEntries, maxOwned)}
			}
		}
		if src == SourcePolicy && s.AllowManagedPermissionRulesOnly {
			eff.ManagedRulesOnly = true
		}
		for _, kv := range []struct {
			b    Behavior
			list []string
		}{{Deny, s.Deny}, {Ask, s.Ask}, {Allow, s.Allow}} {
			for i, text := range kv.list {
				line := 0
				if l := lines[string(kv.b)]; i < len(l) {
					line = l[i]
				}
				r, err := ParseRuleFor(text, kv.b)
				if err != nil {
					return &SettingsError{File: name, Line: line, Err: fmt.Errorf("%s[%d]: %w", kv.b, i, err)}
				}
				r.Source, r.Root = src, root
				r.Origin = name
				if line > 0 {
					r.Origin = fmt.Sprintf("%s:%d", name, line)
				}
				rules = append(rules, r)
			}
		}
		for _, x := range []struct{ field, v string }{{"disableBypassPermissionsMode", s.DisableBypassPermissionsMode}, {"disableAutoMode", s.DisableAutoMode}} {
			if x.v != "" && x.v != "disable" {
				return &SettingsError{File: name, Err: fmt.Errorf("%w: %s must be \"disable\" or absent, not %q", ErrBadSettings, x.field, x.v)}
			}
		}
		eff.DisableBypass = eff.DisableBypass || s.DisableBypassPermissionsMode == "disable"
		eff.DisableAuto = eff.DisableAuto || s.DisableAutoMode == "disable"
		if s.DefaultMode != "" {
			if _, err := ParseMode(s.DefaultMode); err != nil {
				return &SettingsError{File: name, Err: fmt.Errorf("%w: defaultMode: %w", ErrBadSettings, err)}
			}
			modes = append(modes, s.DefaultMode)
		}
		for _, d := range s.AdditionalDirectories {
			abs := absDir(d, root, o.Home)
			if abs == "" {
				return &SettingsError{File: name, Err: fmt.Errorf("%w: additionalDirectories: cannot make %q absolute", ErrBadSettings, d)}
			}
			eff.AdditionalDirectories = append(eff.AdditionalDirectories, abs)
		}
		return nil
	}

	// policySettings: admin files, read with the daemon's privileges, hence the owner check.
	if o.PolicyDir != "" {
		files, err := policyFiles(o.PolicyDir, !o.InsecureSkipOwnerCheck)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			b, err := regfile.Read(f, maxPolicySettingsBytes)
			if err != nil {
				return nil, nil, fmt.Errorf("read policy settings: %w", err)
			}
			s, lines, err := parseSettings(f, b, 0) // root's: see MaxSettingsEntries
			if err != nil {
				return nil, nil, err
			}
			if err := add(f, SourcePolicy, "/", s, lines); err != nil {
				return nil, nil, err
			}
			eff.Files = append(eff.Files, f)
		}
	}
	for _, x := range []struct {
		src Source
		s   *Settings
	}{{SourceCLI, o.CLIArgs}, {SourceSession, o.Session}} {
		if x.s == nil {
			continue
		}
		if err := add(string(x.src), x.src, o.Cwd, *x.s, nil); err != nil {
			return nil, nil, err
		}
	}
	for _, sf := range ownerFiles(o) {
		if o.Owner == nil {
			break
		}
		var (
			b       []byte
			fileUID uint32
			shared  string
			err     error
		)
		or, owned := o.Owner.(OwnedFileReader)
		if owned {
			b, fileUID, shared, err = or.ReadOwnedFile(ctx, sf.path, sf.top)
		} else {
			b, err = o.Owner.ReadFile(ctx, sf.path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, &SettingsError{File: sf.path, Err: fmt.Errorf("read as owner: %w", err)}
		}
		s, lines, err := ParseSettings(sf.path, b)
		if err != nil {
			return nil, nil, err
		}
		project := sf.src == SourceProject || sf.src == SourceLocal
		trusted := o.TrustProject || !project
		notTrusted := "workspace not trusted"
		if trusted && (project && !owned || owned && (fileUID != o.OwnerUID || shared != "")) {
			// Another user's file in the project (a shared dir where anyone may make
			// .sandboxd/): trusting the workspace does not trust them. Root's neither: the
			// daemon itself keeps root's files of text a user chose (a saved tool result),
			// and a link there is anyone's to make. Nor the owner's own file where another
			// may change it (a group-writable file or dir in a team's shared dir): what it
			// says is theirs as much as the owner's. The same holds of the user's settings.
			trusted = false
			who := "whose owner is not known"
			switch {
			case owned && fileUID != o.OwnerUID:
				who = fmt.Sprintf("owned by uid %d, not the session's owner", fileUID)
				if shared != "" {
					who += " (" + shared + ")"
				}
			case owned:
				// chmod alone does not take back a write descriptor someone opened already:
				// a new file does.
				who = "another user may change it: " + shared + " (to trust it, make the dirs writable by you alone and replace the file with a new one: cp F F.new && mv F.new F)"
			}
			if !project {
				notTrusted = "not the session owner's alone"
			}
			eff.Warnings = append(eff.Warnings, fmt.Sprintf("%s: %s; read as an untrusted workspace's", sf.path, who))
		}
		if !trusted {
			// An untrusted file may only make things stricter: deny and ask rules, and a
			// defaultMode no looser than default (a cloned repository cannot start its own
			// sessions in acceptEdits or bypassPermissions).
			if len(s.Allow) > 0 || len(s.AdditionalDirectories) > 0 {
				eff.Warnings = append(eff.Warnings, fmt.Sprintf("%s: %s; allow rules and additionalDirectories ignored", sf.path, notTrusted))
			}
			s.Allow, s.AdditionalDirectories = nil, nil
			delete(lines, string(Allow))
			if s.DefaultMode != "" && !untrustedModes[s.DefaultMode] {
				eff.Warnings = append(eff.Warnings, fmt.Sprintf("%s: %s; defaultMode %s ignored", sf.path, notTrusted, s.DefaultMode))
				s.DefaultMode = ""
			}
		}
		if err := add(sf.path, sf.src, sf.root, s, lines); err != nil {
			return nil, nil, err
		}
		eff.Files = append(eff.Files, sf.path)
	}
	anchors := Anchors{Home: o.Home, Cwd: o.Cwd, HomeLeadsTo: o.HomeLeadsTo, CwdLeadsTo: o.CwdLeadsTo}
	rules = append(rules, newInherited(rules, o.Inherited, anchors)...)
	if eff.ManagedRulesOnly {
		kept := rules[:0]
		dropped := 0
		for _, r := range rules {
			if r.Behavior == Allow && r.Source != SourcePolicy {
				dropped++
				continue
			}
			kept = append(kept, r)
		}
		rules = kept
		if dropped > 0 {
			eff.Warnings = append(eff.Warnings, fmt.Sprintf("allowManagedPermissionRulesOnly: %d allow rules of other sources ignored", dropped))
		}
	}
	eff.DefaultMode = ModeDefault
	if len(modes) > 0 {
		m, _ := ParseMode(modes[0])
		if _, err := eff.ResolveMode(m); err != nil {
			eff.Warnings = append(eff.Warnings, fmt.Sprintf("defaultMode %s is disabled by policy; using default", m))
		} else {
			eff.DefaultMode = m
		}
	}
	rs := NewRuleSet(rules, eff, anchors)
	e := rs.Effective()
	return rs, &e, nil
}

// untrustedModes are the defaultModes an untrusted project's settings may pick: none looser
// than default.
var untrustedModes = map[string]bool{"default": true, "manual": true, "plan": true, "dontAsk": true}

// ownerFiles lists the owner-read sources in precedence order: local, project, user.
func ownerFiles(o LoadOptions) []sourceFile {
	var out []sourceFile
	if p := o.ProjectRoot; p != "" {
		out = append(out, sourceFile{SourceLocal, path.Join(p, ".sandboxd/settings.local.json"), p, p})
		if o.ReadClaudeSettings {
			out = append(out, sourceFile{SourceLocal, path.Join(p, ".claude/settings.local.json"), p, p})
		}
		out = append(out, sourceFile{SourceProject, path.Join(p, ".sandboxd/settings.json"), p, p})
		if o.ReadClaudeSettings {
			out = append(out, sourceFile{SourceProject, path.Join(p, ".claude/settings.json"), p, p})
		}
	}
	if h := o.Home; h != "" {
		out = append(out, sourceFile{SourceUser, path.Join(h, ".config/sandboxd/settings.json"), path.Join(h, ".config/sandboxd"), h})
		if o.ReadClaudeSettings {
			out = append(out, sourceFile{SourceUser, path.Join(h, ".claude/settings.json"), path.Join(h, ".claude"), h})
		}
	}
	return out
}

func absDir(d, root, home string) string {
	switch {
	case strings.HasPrefix(d, "/"):
		return path.Clean(d)
	case d == "~" || strings.HasPrefix(d, "~/"):
		if home == "" {
			return ""
		}
		return path.Join(home, strings.TrimPrefix(d, "~"))
	case root != "" && strings.HasPrefix(root, "/"):
		return path.Join(root, d)
	}
	return ""
}

// policyFiles lists dir/*.json after checking the directory and each file are root-owned and
// not writable by group or others (a group-writable file with gid 0 is accepted).
func policyFiles(dir string, check bool) ([]string, error) {
	if check {
		if err := checkOwner(dir); err != nil {
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
	var out []string
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f := filepath.Join(dir, e.Name())
		if check {
			if err := checkOwner(f); err != nil {
				return nil, err
			}
		}
		out = append(out, f)
	}
	sort.Strings(out)
	return out, nil
}

// maxPolicySettingsBytes bounds one admin settings file of the policy dir.
const maxPolicySettingsBytes = 4 << 20

// CheckPolicyOwner refuses a policy path that someone other than root could have written.
func CheckPolicyOwner(p string) error { return checkOwner(p) }

// WARNING: admin policy is read with the daemon's privileges; a file a user could write would
// let that user rewrite everyone's policy. Rerun TestPolicyOwnerCheckRoot (go test -exec sudo
// ./permission/) after any change.
func checkOwner(p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stat %s: %w", p, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: %w: is a symlink", p, ErrUntrustedPolicyFile)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: %w: no owner information", p, ErrUntrustedPolicyFile)
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid != 0:
		return fmt.Errorf("%s: %w: owned by uid %d, not root", p, ErrUntrustedPolicyFile, st.Uid)
	case perm&0o002 != 0:
		return fmt.Errorf("%s: %w: writable by others (mode %o)", p, ErrUntrustedPolicyFile, perm)
	case perm&0o020 != 0 && st.Gid != 0:
		return fmt.Errorf("%s: %w: writable by group %d (mode %o)", p, ErrUntrustedPolicyFile, st.Gid, perm)
	}
	return nil
}

// MaxSettingsEntries bounds the values one settings file of a user's (project, local or user
// settings) may list in its permissions (allow, deny, ask and additionalDirectories together).
// A file over it is refused as it is scanned, before anything is decoded or built: 1 MiB of
// "a" entries cost the daemon seconds and hundreds of MB per session made from them. The
// daemon's own bound on a session's rules (limits.rules_per_session, 1024 by default) is far
// below it. The admin's policy files are not bounded: they are root's, and one over the bound
// would refuse every session.
const MaxSettingsEntries = 4096

// maxSettingsDepth is encoding/json's bound on nesting, which the scan keeps before the file is
// decoded: past it the decoder says why.
const maxSettingsDepth = 10000

// ParseSettings decodes one settings file and returns its permissions plus the line of every
// rule, keyed by behavior, so errors and origins can say file:line. A file listing more than
// MaxSettingsEntries entries is an error naming the file and the bound.
func ParseSettings(name string, data []byte) (Settings, map[string][]int, error) {
	return parseSettings(name, data, MaxSettingsEntries)
}

// parseSettings is ParseSettings with at most maxEntries entries, or any number for 0.
func parseSettings(name string, data []byte, maxEntries int) (Settings, map[string][]int, error) {
	// Scanned first, so that a file of too many entries is refused before they are decoded.
	lines, err := scanSettings(name, data, maxEntries)
	if err != nil {
		return Settings{}, nil, err
	}
	var f settingsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return Settings{}, nil, &SettingsError{File: name, Line: jsonErrLine(data, err), Err: fmt.Errorf("%w: %w", ErrBadSettings, err)}
	}
	var s Settings
	if f.Permissions != nil {
		dec := json.NewDecoder(bytes.NewReader(*f.Permissions))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			line := 0
			if i := bytes.Index(data, []byte(`"permissions"`)); i >= 0 {
				line = lineAt(data, int64(i))
			}
			return Settings{}, nil, &SettingsError{File: name, Line: line, Err: fmt.Errorf("%w: permissions: %w", ErrBadSettings, err)}
		}
	}
	return s, lines, nil
}

func jsonErrLine(data []byte, err error) int {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return lineAt(data, se.Offset)
	case errors.As(err, &te):
		return lineAt(data, te.Offset)
	}
	return 0
}

func lineAt(data []byte, off int64) int {
	var c lineCounter
	return c.at(data, off)
}

// lineCounter finds the lines of increasing offsets in one text, counting each byte once: a
// count from the start for every string of a file was quadratic in its size.
type lineCounter struct {
	off  int64 // counted up to here
	line int   // the line off is on, less one
}

func (c *lineCounter) at(data []byte, off int64) int {
	off = min(off, int64(len(data)))
	if off < c.off {
		*c = lineCounter{} // never in a scan, whose offsets only grow
	}
	c.line += bytes.Count(data[c.off:off], []byte("\n"))
	c.off = off
	return c.line + 1
}

// settingsKeys are the keys of a "permissions" object, spelled as the agents spell them.
var settingsKeys = map[string]bool{
	"allow": true, "deny": true, "ask": true, "defaultMode": true, "additionalDirectories": true,
	"disableBypassPermissionsMode": true, "disableAutoMode": true, "allowManagedPermissionRulesOnly": true,
}

// scanSettings walks the JSON tokens: it records the line of each string in
// permissions.allow/deny/ask, and refuses what encoding/json would read differently from the
// agents, which are case-sensitive and keep the last of repeated keys. A repeated key anywhere
// (a second "deny" that empties the first), "Permissions" or "Deny" (read by Go's
// case-insensitive match, ignored by the agent) is an error, not a guess, and so is a file of
// more than maxEntries entries (0: any number). Other errors (the file is not JSON) are left to
// the decoder, which says where.
func scanSettings(name string, data []byte, maxEntries int) (map[string][]int, error) {
	out := map[string][]int{}
	dec := json.NewDecoder(bytes.NewReader(data))
	var lines lineCounter
	bad := func(format string, a ...any) error {
		return &SettingsError{File: name, Line: lines.at(data, dec.InputOffset()), Err: fmt.Errorf("%w: "+format, append([]any{ErrBadSettings}, a...)...)}
	}
	entries := 0
	// p is the path to the value, its first keys only (all the checks read): copying the
	// whole path at each level was quadratic in the depth, seconds for a file of brackets.
	var walk func(p []string, depth int) error
	walk = func(p []string, depth int) error {
		if depth > maxSettingsDepth {
			return errTooDeep
		}
		below := func(k string) []string {
			if len(p) == 3 {
				return p
			}
			return append(p[:len(p):len(p)], k)
		}
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		entry := depth == 3 && p[0] == "permissions" && p[2] == "[]"
		if entry {
			// Every value counts, strings or not: the bound is on what the decoder would
			// build, whatever it then makes of it.
			if entries++; maxEntries > 0 && entries > maxEntries {
				return bad("permissions lists more than %d entries (allow, deny, ask and additionalDirectories together), the bound for one settings file", maxEntries)
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				seen := map[string]bool{} // checked within "permissions", and for that key itself
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					ks, _ := k.(string)
					switch {
					case seen[ks] && (depth == 0 && ks == "permissions" || depth > 0 && p[0] == "permissions"):
						return bad("key %q appears twice in one object", ks)
					case depth == 0 && ks != "permissions" && strings.EqualFold(ks, "permissions"),
						depth == 1 && p[0] == "permissions" && !settingsKeys[ks]:
						return bad("unknown key %q (keys are case-sensitive)", ks)
					}
					seen[ks] = true
					if err := walk(below(ks), depth+1); err != nil {
						return err
					}
				}
				_, err = dec.Token()
				return err
			case '[':
				for dec.More() {
					if err := walk(below("[]"), depth+1); err != nil {
						return err
					}
				}
				_, err = dec.Token()
				return err
			}
		case string:
			if entry && (p[1] == "allow" || p[1] == "deny" || p[1] == "ask") {
				out[p[1]] = append(out[p[1]], lines.at(data, dec.InputOffset()))
			}
		}
		return nil
	}
	var se *SettingsError
	if err := walk(nil, 0); errors.As(err, &se) {
		return nil, err
	}
	return out, nil // other errors: the decoder's to report
}

// errTooDeep ends a scan of a file nested deeper than encoding/json reads.
var errTooDeep = errors.New("nested too deep")
