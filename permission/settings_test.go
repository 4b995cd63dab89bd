package permission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// dirReader reads from the real filesystem; the daemon passes one that reads as the owner.
// shared is what it says others may do to a file, by path (the daemon's reader finds out).
type dirReader struct {
	reads  []string
	shared map[string]string
	tops   map[string]string // the top each file was read with
}

func (d *dirReader) ReadFile(_ context.Context, p string) ([]byte, error) {
	d.reads = append(d.reads, p)
	return os.ReadFile(p)
}

func (d *dirReader) ReadOwnedFile(ctx context.Context, p, top string) ([]byte, uint32, string, error) {
	b, err := d.ReadFile(ctx, p)
	if err != nil {
		return nil, 0, "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, 0, "", err
	}
	if d.tops == nil {
		d.tops = map[string]string{}
	}
	d.tops[p] = top
	return b, fi.Sys().(*syscall.Stat_t).Uid, d.shared[p], nil
}

// TestTrustedProjectFilesOfOthers: trusting a workspace trusts its settings files written by
// the session's owner (or root) only. In a shared dir where anyone may make .sandboxd/,
// another user's file keeps only what an untrusted workspace's may: deny and ask rules.
func TestTrustedProjectFilesOfOthers(t *testing.T) {
	testutil.RequireRoot(t)
	proj := t.TempDir()
	p := filepath.Join(proj, ".sandboxd/settings.json")
	write(t, p, `{"permissions":{"allow":["Bash(*)"],"deny":["Read(.env)"],"defaultMode":"bypassPermissions","additionalDirectories":["/home"]}}`)
	load := func(owner uint32) (*RuleSet, *Effective) {
		t.Helper()
		rs, eff, err := Load(context.Background(), LoadOptions{Cwd: proj, ProjectRoot: proj, Owner: &dirReader{}, TrustProject: true, OwnerUID: owner})
		if err != nil {
			t.Fatal(err)
		}
		return rs, eff
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []uint32{1000, 0} {
		rs, eff := load(owner)
		t.Logf("owner %d: %v", owner, eff.Warnings)
		var got []string
		for _, r := range rs.Rules() {
			got = append(got, string(r.Behavior)+":"+r.String())
		}
		if strings.Join(got, " ") != "deny:Read(.env)" || eff.DefaultMode == "bypassPermissions" || len(eff.AdditionalDirectories) != 0 {
			t.Errorf("owner %d, file of uid 4242: rules %v, mode %q, dirs %v", owner, got, eff.DefaultMode, eff.AdditionalDirectories)
		}
		if !strings.Contains(strings.Join(eff.Warnings, "\n"), "owned by uid 4242") {
			t.Errorf("owner %d: no warning naming the file's owner: %q", owner, eff.Warnings)
		}
	}
	if err := os.Chown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	// Root's file is no more the owner's: the daemon keeps root's files of text a user chose.
	if err := os.Chown(p, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, eff := load(1000); eff.DefaultMode == "bypassPermissions" || !strings.Contains(strings.Join(eff.Warnings, "\n"), "owned by uid 0") {
		t.Errorf("owner 1000, file of root: mode %q, warnings %q", eff.DefaultMode, eff.Warnings)
	}
	if err := os.Chown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	rs, eff := load(1000)
	if !slices.ContainsFunc(rs.Rules(), func(r Rule) bool { return r.Behavior == Allow && r.String() == "Bash" }) || eff.DefaultMode != "bypassPermissions" {
		t.Errorf("the owner's own file in a trusted workspace: rules %v, mode %q", rs.Rules(), eff.DefaultMode)
	}
}

// TestSettingsOthersMayChange: the owner's own settings file that another user may change
// (its file or a dir on the way writable by a group or by others, or through an ACL) widens
// nothing, though the workspace is trusted: its deny and ask rules hold, its allow rules,
// additionalDirectories and a defaultMode looser than default do not. The same of the user's
// own settings. Each is asked about up to its project's dir or the owner's home.
func TestSettingsOthersMayChange(t *testing.T) {
	t.Parallel()
	body := `{"permissions":{"allow":["Bash(*)"],"deny":["Read(.env)"],"defaultMode":"bypassPermissions","additionalDirectories":["/srv"]}}`
	for _, tc := range []struct {
		src  Source
		file string // under the project's dir, or under the home for userSettings
	}{
		{SourceProject, ".sandboxd/settings.json"},
		{SourceLocal, ".sandboxd/settings.local.json"},
		{SourceUser, ".config/sandboxd/settings.json"},
	} {
		root := t.TempDir()
		proj, home := filepath.Join(root, "proj"), filepath.Join(root, "home")
		top := map[Source]string{SourceProject: proj, SourceLocal: proj, SourceUser: home}[tc.src]
		p := filepath.Join(top, tc.file)
		write(t, p, body)
		load := func(shared map[string]string) (*RuleSet, *Effective, *dirReader) {
			t.Helper()
			rd := &dirReader{shared: shared}
			rs, eff, err := Load(context.Background(), LoadOptions{Cwd: proj, ProjectRoot: proj, Home: home, Owner: rd,
				TrustProject: true, OwnerUID: uint32(os.Getuid())})
			if err != nil {
				t.Fatal(err)
			}
			return rs, eff, rd
		}
		why := filepath.Dir(p) + " is writable by group 1234 (mode 2775)"
		rs, eff, rd := load(map[string]string{p: why})
		var got []string
		for _, r := range rs.Rules() {
			got = append(got, string(r.Behavior)+":"+r.String())
		}
		if strings.Join(got, " ") != "deny:Read(.env)" || eff.DefaultMode != ModeDefault || len(eff.AdditionalDirectories) != 0 {
			t.Errorf("%s, %s: rules %v, mode %s, dirs %v; want its deny alone", tc.src, why, got, eff.DefaultMode, eff.AdditionalDirectories)
		}
		if w := strings.Join(eff.Warnings, "\n"); !strings.Contains(w, p+": another user may change it: "+why) {
			t.Errorf("%s: no warning saying why: %q", tc.src, eff.Warnings)
		}
		if rd.tops[p] != top {
			t.Errorf("%s asked about up to %q, want %q", p, rd.tops[p], top)
		}
		// The owner's alone, it widens as it says.
		rs, eff, _ = load(nil)
		if !slices.ContainsFunc(rs.Rules(), func(r Rule) bool { return r.Behavior == Allow && r.String() == "Bash" }) ||
			eff.DefaultMode != ModeBypassPermissions || !slices.Equal(eff.AdditionalDirectories, []string{"/srv"}) {
			t.Errorf("%s of the owner's alone: rules %v, mode %s, dirs %v (%q)", tc.src, rs.Rules(), eff.DefaultMode, eff.AdditionalDirectories, eff.Warnings)
		}
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pol, proj, home := filepath.Join(root, "policy.d"), filepath.Join(root, "proj"), filepath.Join(root, "home")
	write(t, filepath.Join(pol, "10-base.json"), `{"permissions":{"deny":["Bash(curl *)"],"allow":["Bash(make *)"],"disableBypassPermissionsMode":"disable"}}`)
	write(t, filepath.Join(proj, ".sandboxd/settings.json"), `{"permissions":{
  "allow": ["Bash(npm *)"],
  "ask": ["Bash(git push *)"],
  "defaultMode": "acceptEdits",
  "additionalDirectories": ["../shared"]
}, "hooks": {}}`)
	write(t, filepath.Join(proj, ".sandboxd/settings.local.json"), `{"permissions":{"deny":["Read(.env)"]}}`)
	write(t, filepath.Join(home, ".config/sandboxd/settings.json"), `{"permissions":{"allow":["Read(~/notes/**)"],"defaultMode":"plan"}}`)
	write(t, filepath.Join(proj, ".claude/settings.json"), `{"permissions":{"allow":["Bash(cargo *)"]}}`)

	rd := &dirReader{}
	rs, eff, err := Load(context.Background(), LoadOptions{
		PolicyDir: pol, CLIArgs: &Settings{Deny: []string{"Bash(sudo *)"}}, Session: &Settings{Allow: []string{"WebFetch(domain:go.dev)"}},
		Cwd: proj, ProjectRoot: proj, Home: home, Owner: rd, TrustProject: true, OwnerUID: uint32(os.Getuid()), InsecureSkipOwnerCheck: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs.Rules() {
		got = append(got, string(r.Source)+":"+string(r.Behavior)+":"+r.String())
	}
	want := []string{
		"policySettings:deny:Bash(curl *)", "policySettings:allow:Bash(make *)",
		"cliArg:deny:Bash(sudo *)", "session:allow:WebFetch(domain:go.dev)",
		"localSettings:deny:Read(.env)",
		"projectSettings:ask:Bash(git push *)", "projectSettings:allow:Bash(npm *)",
		"userSettings:allow:Read(~/notes/**)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules in precedence order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if eff.DefaultMode != ModeAcceptEdits {
		t.Errorf("default mode %s: the strongest source's (project) should win", eff.DefaultMode)
	}
	if !eff.DisableBypass {
		t.Error("admin disableBypassPermissionsMode lost")
	}
	if len(eff.AdditionalDirectories) != 1 || eff.AdditionalDirectories[0] != filepath.Join(root, "shared") {
		t.Errorf("additional dirs %v", eff.AdditionalDirectories)
	}
	for _, r := range rs.Rules() {
		if r.Source == SourceProject && r.Behavior == Ask && !strings.HasSuffix(r.Origin, "settings.json:3") {
			t.Errorf("origin %q, want file:line 3", r.Origin)
		}
	}
	for _, p := range rd.reads {
		if strings.HasPrefix(p, pol) {
			t.Errorf("admin file %s read through the owner reader", p)
		}
		if strings.Contains(p, ".claude") {
			t.Errorf("read %s without ReadClaudeSettings", p)
		}
	}
	if _, err := eff.ResolveMode(ModeBypassPermissions); !errors.Is(err, ErrModeDisabled) {
		t.Errorf("bypass should be disabled: %v", err)
	}
	var sb strings.Builder
	if err := rs.WriteTable(&sb); err != nil || !strings.Contains(sb.String(), "Bash(curl *)") {
		t.Errorf("table: %v\n%s", err, sb.String())
	}
}

func TestLoadClaudeAndTrust(t *testing.T) {
	t.Parallel()
	proj := t.TempDir()
	write(t, filepath.Join(proj, ".claude/settings.json"), `{"permissions":{"allow":["Bash(cargo *)"],"deny":["Bash(rm *)"]}}`)
	rs, eff, err := Load(context.Background(), LoadOptions{Cwd: proj, ProjectRoot: proj, Owner: &dirReader{}, ReadClaudeSettings: true})
	if err != nil {
		t.Fatal(err)
	}
	rules := rs.Rules()
	if len(rules) != 1 || rules[0].Behavior != Deny {
		t.Errorf("untrusted project: want only the deny rule, got %v", rules)
	}
	if len(eff.Warnings) == 0 {
		t.Error("dropping untrusted allow rules must warn")
	}
}

func TestLoadManagedOnly(t *testing.T) {
	t.Parallel()
	pol := t.TempDir()
	write(t, filepath.Join(pol, "a.json"), `{"permissions":{"allowManagedPermissionRulesOnly":true,"allow":["Bash(make)"]}}`)
	rs, _, err := Load(context.Background(), LoadOptions{PolicyDir: pol, InsecureSkipOwnerCheck: true,
		Session: &Settings{Allow: []string{"Bash"}, Deny: []string{"Bash(rm *)"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs.Rules() {
		got = append(got, string(r.Behavior)+":"+r.String())
	}
	if strings.Join(got, ",") != "allow:Bash(make),deny:Bash(rm *)" {
		t.Errorf("managed-only keeps admin allows and every deny: %v", got)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body string
		line       int
		is         error
		like       string
	}{
		{"bad rule", "{\"permissions\": {\n  \"allow\": [\n    \"Bash(ls\"\n  ]}}", 3, ErrMalformedRule, "must end with ')'"},
		{"unknown key", "{\"permissions\": {\"denny\": [\"Bash\"]}}", 1, ErrBadSettings, "denny"},
		{"syntax", "{\"permissions\": {\n\"allow\": [,]}}", 2, ErrBadSettings, "invalid character"},
		{"bad mode", `{"permissions": {"defaultMode": "yolo"}}`, 0, ErrBadSettings, "unknown permission mode"},
		{"bad disable", `{"permissions": {"disableAutoMode": "yes"}}`, 0, ErrBadSettings, "disable"},
		{"param allow", `{"permissions": {"allow": ["Bash(run_in_background:true)"]}}`, 1, ErrMalformedRule, "deny/ask only"},
		// What Go would read one way and the agent another: the agent keeps the last of
		// repeated keys and ignores differently-cased ones.
		{"repeated deny", "{\"permissions\": {\n\"deny\": [\"Read(./.env)\"],\n\"deny\": []}}", 3, ErrBadSettings, `"deny" appears twice`},
		{"repeated permissions", "{\"permissions\": {\"deny\": [\"Bash\"]},\n\"permissions\": {}}", 2, ErrBadSettings, `"permissions" appears twice`},
		{"cased key", "{\"permissions\": {\"deny\": [\"Bash\"],\n \"Deny\": []}}", 2, ErrBadSettings, `unknown key "Deny"`},
		{"cased allow", `{"permissions": {"Allow": ["Bash"]}}`, 1, ErrBadSettings, `unknown key "Allow"`},
		{"cased permissions", `{"Permissions": {"allow": ["Bash"]}}`, 1, ErrBadSettings, `unknown key "Permissions"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proj := t.TempDir()
			f := filepath.Join(proj, ".sandboxd/settings.json")
			write(t, f, tc.body)
			_, _, err := Load(context.Background(), LoadOptions{Cwd: proj, ProjectRoot: proj, Owner: &dirReader{}, TrustProject: true})
			var se *SettingsError
			if !errors.As(err, &se) || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.like) {
				t.Fatalf("err = %v, want SettingsError wrapping %v containing %q", err, tc.is, tc.like)
			}
			if se.File != f || se.Line != tc.line {
				t.Errorf("located at %s:%d, want %s:%d", se.File, se.Line, f, tc.line)
			}
		})
	}
}

// TestSettingsOtherKeysLoose: repeated keys outside "permissions" belong to other readers
// (hooks, env) and do not stop a session.
func TestSettingsOtherKeysLoose(t *testing.T) {
	t.Parallel()
	s, _, err := ParseSettings("s.json", []byte(`{"env": {"A": "1", "A": "2"}, "env": {}, "permissions": {"deny": ["Bash"]}}`))
	if err != nil || !slices.Equal(s.Deny, []string{"Bash"}) {
		t.Fatalf("ParseSettings = %+v, %v; want deny [Bash] and no error", s, err)
	}
}

func TestPolicyOwnerCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.json"), `{"permissions":{"deny":["Bash"]}}`)
	if err := os.Chmod(filepath.Join(dir, "a.json"), 0o666); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(context.Background(), LoadOptions{PolicyDir: dir})
	if !errors.Is(err, ErrUntrustedPolicyFile) {
		t.Fatalf("world-writable policy file accepted: %v", err)
	}
}

// TestPolicyOwnerCheckRoot needs root to chown: a file owned by another uid is refused, a
// root-owned 0644 file in a 0755 directory is read.
func TestPolicyOwnerCheckRoot(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.json"), `{"permissions":{"deny":["Bash"]}}`)
	if err := os.Chown(filepath.Join(dir, "a.json"), 1234, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(context.Background(), LoadOptions{PolicyDir: dir}); !errors.Is(err, ErrUntrustedPolicyFile) {
		t.Fatalf("policy file owned by uid 1234 accepted: %v", err)
	}
	if err := os.Chown(filepath.Join(dir, "a.json"), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rs, _, err := Load(context.Background(), LoadOptions{PolicyDir: dir})
	if err != nil || len(rs.Rules()) != 1 {
		t.Fatalf("root-owned 0644 file refused: %v", err)
	}
}

func TestRuleSetData(t *testing.T) {
	t.Parallel()
	var rules []Rule
	for _, s := range []struct {
		text string
		b    Behavior
	}{{"Edit", Allow}, {"Read(~/.ssh/**)", Deny}, {"Bash(git *)", Allow}, {"Bash(*x *)", Allow}, {"Read(/x)", Allow}} {
		r, err := ParseRuleFor(s.text, s.b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = SourceProject
		rules = append(rules, r)
	}
	rs := NewRuleSet(rules, Effective{}, Anchors{Home: "/home/u", Cwd: "/w"})
	allow := rs.Data()["allow"].(map[string]any)
	tools := allow["tools"].(map[string][]any)
	for _, tool := range []string{"Edit", "Write", "NotebookEdit", "Read"} {
		if len(tools[tool]) != 1 {
			t.Errorf("bare Edit allow should cover %s", tool)
		}
	}
	bash := allow["bash"].(map[string]any)
	if len(bash["word"].(map[string][]any)["git"]) != 1 || len(bash["other"].([]any)) != 1 {
		t.Errorf("bash index wrong: %v", bash)
	}
	deny := rs.Data()["deny"].(map[string]any)["paths"].(map[string][]any)
	if len(deny["read"]) != 1 || len(deny["write"]) != 1 {
		t.Errorf("Read deny must cover reads and writes: %v", deny)
	}
	if len(rs.Effective().Warnings) != 1 {
		t.Errorf("Read(/x) with no project root should warn and be dropped: %v", rs.Effective().Warnings)
	}
	if rs.Digest() == NewRuleSet(rules[:1], Effective{}, Anchors{}).Digest() {
		t.Error("digest ignores rules")
	}
}

// TestUntrustedProjectModes: an untrusted project's settings may pick a defaultMode no looser
// than default; a looser one is ignored with a warning (the user's own file still applies).
func TestUntrustedProjectModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, file string
		trust      bool
		want       Mode
	}{
		{"bypassPermissions", ".sandboxd/settings.json", false, ModeDefault},
		{"acceptEdits", ".sandboxd/settings.local.json", false, ModeDefault},
		{"auto", ".sandboxd/settings.json", false, ModeDefault},
		{"bubble", ".claude/settings.json", false, ModeDefault},
		{"plan", ".sandboxd/settings.json", false, ModePlan},
		{"dontAsk", ".sandboxd/settings.json", false, ModeDontAsk},
		{"bypassPermissions", ".sandboxd/settings.json", true, ModeBypassPermissions},
	} {
		t.Run(tc.mode+"_"+tc.file, func(t *testing.T) {
			proj := t.TempDir()
			write(t, filepath.Join(proj, tc.file), `{"permissions":{"defaultMode":"`+tc.mode+`"}}`)
			_, eff, err := Load(context.Background(), LoadOptions{Cwd: proj, ProjectRoot: proj, Owner: &dirReader{},
				TrustProject: tc.trust, ReadClaudeSettings: true})
			if err != nil {
				t.Fatal(err)
			}
			if eff.DefaultMode != tc.want {
				t.Errorf("default mode %s, want %s (warnings %v)", eff.DefaultMode, tc.want, eff.Warnings)
			}
		})
	}
}

// TestKernelPaths: Read denies become hidden patterns, Edit-family denies read-only ones,
// and only an Edit allow that names a path lifts its protection.
func TestKernelPaths(t *testing.T) {
	t.Parallel()
	var rules []Rule
	for _, x := range []struct {
		text string
		b    Behavior
	}{{"Read(.env)", Deny}, {"Read(~/secret)", Deny}, {"Edit(src/gen/**)", Deny}, {"Write(//etc/x)", Deny},
		{"Read(docs/**)", Ask}, {"Edit(.git/config)", Allow}, {"Edit(**)", Allow}} {
		r, err := ParseRuleFor(x.text, x.b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = SourceSession
		rules = append(rules, r)
	}
	rs := NewRuleSet(rules, Effective{}, Anchors{Home: "/home/u", Cwd: "/home/u/p"})
	if k := rs.KernelPaths(Ask); strings.Join(k.Hidden, " ") != "/**/docs/**" || len(k.ReadOnly) != 0 {
		t.Errorf("asks: %+v", k)
	}
	k := rs.KernelPaths(Deny)
	if strings.Join(k.Hidden, " ") != "/**/.env /home/u/secret" {
		t.Errorf("hidden %v", k.Hidden)
	}
	if strings.Join(k.ReadOnly, " ") != "/**/src/gen/** /etc/x" { // a deny reaches any depth (COMPAT 1)
		t.Errorf("read-only %v", k.ReadOnly)
	}
	if !rs.EditAllowed("/home/u/p/.git/config") {
		t.Error("Edit(.git/config) should lift .git/config")
	}
	if rs.EditAllowed("/home/u/p/.bashrc") {
		t.Error("Edit(**) names no path: it must not lift .bashrc")
	}
}

// TestIgnoredAllowPathRules: agents ignore Write, NotebookEdit, Glob and MultiEdit path rules
// (COMPAT 1), so their allows are dropped with a warning (honoured, they would allow what the
// agent asks about), while their denies and asks are kept: they only narrow.
func TestIgnoredAllowPathRules(t *testing.T) {
	var rules []Rule
	for _, tc := range []struct {
		text string
		b    Behavior
	}{
		{"Write(//tmp/**)", Allow}, {"MultiEdit(//tmp/**)", Allow}, {"NotebookEdit(//tmp/**)", Allow}, {"Glob(//tmp/**)", Allow},
		{"Write(//tmp/x)", Deny}, {"Glob(//tmp/y)", Ask}, {"Edit(//tmp/**)", Allow},
	} {
		r, err := ParseRuleFor(tc.text, tc.b)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	rs := NewRuleSet(rules, Effective{}, Anchors{Home: "/home/u", Cwd: "/home/u/p"})
	var kept []string
	for _, r := range rs.Rules() {
		kept = append(kept, string(r.Behavior)+" "+r.String())
	}
	want := []string{"allow Edit(//tmp/**)", "deny Write(//tmp/x)", "ask Glob(//tmp/y)"}
	slices.Sort(kept)
	slices.Sort(want)
	if !slices.Equal(kept, want) {
		t.Errorf("kept %v, want %v", kept, want)
	}
	if n := len(rs.Effective().Warnings); n != 4 {
		t.Errorf("%d warnings, want one per dropped allow: %v", n, rs.Effective().Warnings)
	}
}

// entriesJSON is a settings file whose permissions list n entries under key, one a line.
func entriesJSON(key, entry string, n int) []byte {
	var b strings.Builder
	b.WriteString("{\"permissions\": {\n  \"" + key + "\": [\n")
	for i := range n {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`    "` + entry + `"`)
	}
	b.WriteString("\n  ]\n}}\n")
	return []byte(b.String())
}

// TestSettingsEntriesBounded: a settings file is a user's own, and one of 260 000 entries
// cost the daemon seconds and hundreds of MB for each session made from it. One listing more
// than MaxSettingsEntries is refused as it is scanned, naming the file and the bound, before
// any rule is built (these would not parse), and every entry's line is still found.
func TestSettingsEntriesBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, entry string
		n                int
		ok               bool
	}{
		{"deny at the bound", "deny", "Bash(rm *)", MaxSettingsEntries, true},
		{"deny over", "deny", "Bash(", MaxSettingsEntries + 1, false},
		{"allow far over", "allow", "a(", 64 * MaxSettingsEntries, false},
		{"directories over", "additionalDirectories", "/tmp", MaxSettingsEntries + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, lines, err := ParseSettings("/p/settings.json", entriesJSON(tc.key, tc.entry, tc.n))
			if tc.ok {
				if err != nil || len(s.Deny) != tc.n || len(lines["deny"]) != tc.n {
					t.Fatalf("ParseSettings = %d rules, %d lines, %v; want %d and no error", len(s.Deny), len(lines["deny"]), err, tc.n)
				}
				for i, l := range lines["deny"] {
					if l != i+3 {
						t.Fatalf("entry %d is on line %d, found on %d", i, i+3, l)
					}
				}
				return
			}
			var se *SettingsError
			if !errors.As(err, &se) || !errors.Is(err, ErrBadSettings) || se.File != "/p/settings.json" ||
				!strings.Contains(err.Error(), fmt.Sprint(MaxSettingsEntries)) {
				t.Fatalf("ParseSettings: %v; want a SettingsError of /p/settings.json naming the bound %d", err, MaxSettingsEntries)
			}
			if want := MaxSettingsEntries + 3; se.Line != want {
				t.Errorf("refused at line %d, want %d (the first entry over)", se.Line, want)
			}
		})
	}
}

// TestLoadOwnedEntriesBounded: the sources a session's owner fills are bounded all together,
// each under its own bound too, before the rules of the one that goes over are built; the
// admin's files are root's, neither bounded nor counted.
func TestLoadOwnedEntriesBounded(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pol, proj := filepath.Join(root, "policy.d"), filepath.Join(root, "proj")
	write(t, filepath.Join(pol, "10-base.json"), string(entriesJSON("deny", "Bash(curl *)", MaxSettingsEntries+1)))
	project := filepath.Join(proj, ".sandboxd/settings.json")
	write(t, project, string(entriesJSON("deny", "Read(", 1500)))
	session := make([]string, 3000)
	for i := range session {
		session[i] = "Bash(make *)"
	}
	load := func(max int, sess []string) error {
		_, _, err := Load(context.Background(), LoadOptions{
			PolicyDir: pol, InsecureSkipOwnerCheck: true, Session: &Settings{Deny: sess},
			Cwd: proj, ProjectRoot: proj, Owner: &dirReader{}, TrustProject: true, MaxOwnedEntries: max,
		})
		return err
	}
	err := load(0, session)
	var se *SettingsError
	if !errors.As(err, &se) || !errors.Is(err, ErrBadSettings) || se.File != project ||
		!strings.Contains(err.Error(), fmt.Sprintf("4500 entries (allow, deny, ask and additionalDirectories), over the bound of %d", DefaultMaxOwnedEntries)) {
		t.Errorf("session and project over the default: %v; want a SettingsError of %s naming the bound %d", err, project, DefaultMaxOwnedEntries)
	}
	if err := load(2999, session); !errors.As(err, &se) || se.File != "session" {
		t.Errorf("session over MaxOwnedEntries: %v; want a SettingsError of the session's rules", err)
	}
	if err := load(0, session[:10]); !errors.As(err, &se) || se.File != project || !errors.Is(err, ErrMalformedRule) {
		t.Errorf("within the bound: %v; want the project's malformed rule", err)
	}
}

// TestSettingsDeeplyNested: the scan that now comes first stops where encoding/json does
// (10 000 levels), so a file of nothing but brackets is the decoder's error, not a deep
// recursion.
func TestSettingsDeeplyNested(t *testing.T) {
	t.Parallel()
	for _, body := range []string{strings.Repeat("[", 1<<20), `{"permissions": {"deny": ` + strings.Repeat("[", 1<<20)} {
		if _, _, err := ParseSettings("s.json", []byte(body)); !errors.Is(err, ErrBadSettings) {
			t.Errorf("ParseSettings of %.30s...: %v, want ErrBadSettings", body, err)
		}
	}
}
