package permission

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// pathHit reports whether a path rule of behavior b in rs's data (the items the policy scans,
// in bucket "read" or "write") matches p.
func pathHit(rs *RuleSet, b Behavior, bucket, p string) bool {
	items := rs.Data()[string(b)].(map[string]any)["paths"].(map[string][]any)[bucket]
	for _, it := range items {
		if MatchPath(it.(map[string]any)["pattern"].(string), p) {
			return true
		}
	}
	return false
}

// TestAbsPatternsThroughLinks: a rule anchored at a cwd, home or settings root that leads
// elsewhere holds under where it leads too; one anchored at / or at any depth, or at a dir
// that leads nowhere else, has its one pattern.
func TestAbsPatternsThroughLinks(t *testing.T) {
	t.Parallel()
	a := Anchors{Home: "/home/c", HomeLeadsTo: "/home/c_real", Cwd: "/home/u/proj2link", CwdLeadsTo: "/home/u/proj2"}
	mk := func(text string, b Behavior, src Source, root string) Rule {
		r, err := ParseRuleFor(text, b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source, r.Root = src, root
		return r
	}
	for _, tc := range []struct {
		r    Rule
		a    Anchors
		want []string
	}{
		{mk("Read(./secrets/**)", Ask, SourceSession, ""), a, []string{"/home/u/proj2link/secrets/**", "/home/u/proj2/secrets/**"}},
		{mk("Read(/secrets/**)", Deny, SourceSession, ""), a, []string{"/home/u/proj2link/secrets/**", "/home/u/proj2/secrets/**"}},
		{mk("Edit(src/**)", Allow, SourceCLI, ""), a, []string{"/home/u/proj2link/src/**", "/home/u/proj2/src/**"}},
		{mk("Read(~/vault/**)", Deny, SourceUser, ""), a, []string{"/home/c/vault/**", "/home/c_real/vault/**"}},
		// A project file's root is the session's root; the user file's lies in the home.
		{mk("Read(/secrets/**)", Deny, SourceProject, "/home/u/proj2link"), a, []string{"/home/u/proj2link/secrets/**", "/home/u/proj2/secrets/**"}},
		{mk("Read(/x)", Deny, SourceUser, "/home/c/.config/sandboxd"), a, []string{"/home/c/.config/sandboxd/x", "/home/c_real/.config/sandboxd/x"}},
		{mk("Read(//home/u/proj2link/k)", Deny, SourceSession, ""), a, []string{"/home/u/proj2link/k"}},
		{mk("Read(.env)", Deny, SourceSession, ""), a, []string{"/**/.env"}},
		{mk("Read(/etc/x)", Deny, SourcePolicy, "/"), a, []string{"/etc/x"}},
		{mk("Read(./x)", Deny, SourceSession, ""), Anchors{Home: "/h", Cwd: "/w", CwdLeadsTo: "/w"}, []string{"/w/x"}},
		{mk("Read(./x)", Deny, SourceSession, ""), Anchors{Home: "/h", Cwd: "/w"}, []string{"/w/x"}},
		// The deepest anchor decides: a cwd in a linked home leads where the cwd does.
		{mk("Read(./x)", Deny, SourceSession, ""), Anchors{Home: "/home/c", HomeLeadsTo: "/home/c_real", Cwd: "/home/c/p", CwdLeadsTo: "/srv/p"}, []string{"/home/c/p/x", "/srv/p/x"}},
		{mk("Read(./x)", Deny, SourceSession, ""), Anchors{Home: "/home/c", HomeLeadsTo: "/home/c_real", Cwd: "/home/c/p"}, []string{"/home/c/p/x", "/home/c_real/p/x"}},
		// The real dir's glob characters are escaped as the given one's are.
		{mk("Read(./x)", Deny, SourceSession, ""), Anchors{Cwd: "/w", CwdLeadsTo: "/r[1]"}, []string{"/w/x", `/r\[1\]/x`}},
	} {
		got, ok := tc.r.AbsPatterns(tc.a)
		if !ok || !slices.Equal(got, tc.want) {
			t.Errorf("%s (%s) with %+v: %q, %v; want %q", tc.r, tc.r.Source, tc.a, got, ok, tc.want)
		}
	}
}

// TestRuleSetLinkedCwdAndHome: a session given as a link decides a path by its real name as
// by the link's (an ask on ./secrets holds a read of the real dir's secrets), for deny, ask
// and allow rules alike, and likewise for a home that is a link.
func TestRuleSetLinkedCwdAndHome(t *testing.T) {
	t.Parallel()
	var rules []Rule
	for _, s := range []struct {
		text string
		b    Behavior
		src  Source
	}{
		{"Read(./secrets/**)", Ask, SourceSession},
		{"Edit(./src/**)", Ask, SourceSession},
		{"Read(~/vault/**)", Deny, SourceUser},
		{"Edit(./docs/**)", Allow, SourceSession},
	} {
		r, err := ParseRuleFor(s.text, s.b)
		if err != nil {
			t.Fatal(err)
		}
		r.Source = s.src
		rules = append(rules, r)
	}
	rs := NewRuleSet(rules, Effective{}, Anchors{Home: "/home/c", HomeLeadsTo: "/home/c_real", Cwd: "/home/u/proj2link", CwdLeadsTo: "/home/u/proj2"})
	for _, tc := range []struct {
		b         Behavior
		bucket, p string
		want      bool
	}{
		{Ask, "read", "/home/u/proj2link/secrets/k", true},
		{Ask, "read", "/home/u/proj2/secrets/k", true},
		{Ask, "write", "/home/u/proj2/src/new.txt", true},
		{Ask, "read", "/home/u/proj2/other", false},
		{Deny, "read", "/home/c_real/vault/k", true},
		{Deny, "read", "/home/c/vault/k", true},
		{Allow, "write", "/home/u/proj2/docs/a.md", true},
	} {
		if got := pathHit(rs, tc.b, tc.bucket, tc.p); got != tc.want {
			t.Errorf("%s %s of %s: hit %v, want %v", tc.b, tc.bucket, tc.p, got, tc.want)
		}
	}
	unlinked := NewRuleSet(rules, Effective{}, Anchors{Home: "/home/c", Cwd: "/home/u/proj2link"})
	if unlinked.Digest() == rs.Digest() {
		t.Error("the digest ignores where the anchors lead")
	}
}

// TestInheritedRulesMeanWhatTheyMeanInTheParent: a child at a subdir of its parent's root is
// held by the parent's session, project and user deny and ask rules at the paths they name
// for the parent (not read again against the child's root), by its session allows, and not
// by its other allows; the owner's own rules it loads itself come once.
func TestInheritedRulesMeanWhatTheyMeanInTheParent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proj, home := filepath.Join(root, "proj4"), filepath.Join(root, "home")
	sub := filepath.Join(proj, "sub")
	write(t, filepath.Join(proj, ".sandboxd/settings.json"), `{"permissions":{"deny":["Read(./secrets/**)"],"ask":["Edit(/Makefile)"],"allow":["Bash(make *)"]}}`)
	write(t, filepath.Join(home, ".config/sandboxd/settings.json"), `{"permissions":{"deny":["Read(~/vault/**)","Bash(curl *)"]}}`)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	load := func(cwd string, s *Settings, inherited []Rule) *RuleSet {
		t.Helper()
		rs, _, err := Load(context.Background(), LoadOptions{
			Session: s, Cwd: cwd, ProjectRoot: cwd, Home: home, Owner: &dirReader{},
			TrustProject: true, OwnerUID: uint32(os.Getuid()), Inherited: inherited,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	parent := load(proj, &Settings{
		Deny:  []string{"Edit(./sub/locked/**)", "Read(/sub/.env)"},
		Allow: []string{"Edit(./build/**)"},
	}, nil)
	child := load(sub, &Settings{}, parent.Inheritable("P"))
	grandchild := load(filepath.Join(sub), &Settings{}, child.Inheritable("C"))
	for _, rs := range []*RuleSet{child, grandchild} {
		for _, tc := range []struct {
			b         Behavior
			bucket, p string
			want      bool
		}{
			{Deny, "write", filepath.Join(sub, "locked/f.txt"), true},
			{Deny, "write", filepath.Join(sub, "sub/locked/f.txt"), false},
			{Deny, "read", filepath.Join(sub, ".env"), true},
			{Deny, "read", filepath.Join(sub, "sub/.env"), false},
			{Deny, "read", filepath.Join(proj, "secrets/k"), true},
			{Deny, "read", filepath.Join(home, "vault/k"), true},
			{Ask, "write", filepath.Join(proj, "Makefile"), true},
			{Allow, "write", filepath.Join(proj, "build/x"), true},
			{Allow, "write", filepath.Join(sub, "build/x"), false},
		} {
			if got := pathHit(rs, tc.b, tc.bucket, tc.p); got != tc.want {
				t.Errorf("%s %s of %s: hit %v, want %v", tc.b, tc.bucket, tc.p, got, tc.want)
			}
		}
		var texts []string
		for _, r := range rs.Rules() {
			texts = append(texts, string(r.Behavior)+":"+r.String())
			if r.Behavior == Allow && r.Tool == "Bash" {
				t.Errorf("the parent's project allow %s (%s) reached the child", r, r.Origin)
			}
		}
		// The owner's user file is the child's own too: its rules come once.
		for _, want := range []string{"deny:Read(~/vault/**)", "deny:Bash(curl *)"} {
			if n := count(texts, want); n != 1 {
				t.Errorf("%s: %d times in %q", want, n, texts)
			}
		}
		if n := count(texts, "deny:Read(//"+filepath.Join(home, "vault/**")+")"); n != 0 {
			t.Errorf("the user file's ~ rule came again as an absolute one: %q", texts)
		}
	}
	// It says where it was written, not each session it passed through.
	i := slices.IndexFunc(grandchild.Rules(), func(r Rule) bool { return r.Content == "/"+filepath.Join(sub, "locked/**") })
	if i < 0 || grandchild.Rules()[i].Origin != "inherited from session P: session" {
		t.Errorf("the grandparent's rule in the grandchild: %d in %+v", i, grandchild.Rules())
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestInheritedThroughLinkedRoot: a parent given as a link passes its rules on under both
// names of its root, so a child (whose root is another dir) holds them under either.
func TestInheritedThroughLinkedRoot(t *testing.T) {
	t.Parallel()
	r, err := ParseRuleFor("Read(./secrets/**)", Ask)
	if err != nil {
		t.Fatal(err)
	}
	r.Source = SourceSession
	parent := NewRuleSet([]Rule{r}, Effective{}, Anchors{Home: "/home/u", Cwd: "/home/u/link", CwdLeadsTo: "/home/u/real"})
	child := NewRuleSet(parent.Inheritable("P"), Effective{}, Anchors{Home: "/home/u", Cwd: "/home/u/link/sub", CwdLeadsTo: "/home/u/real/sub"})
	for _, p := range []string{"/home/u/link/secrets/k", "/home/u/real/secrets/k"} {
		if !pathHit(child, Ask, "read", p) {
			t.Errorf("the parent's ask does not hold %s in the child", p)
		}
	}
}
