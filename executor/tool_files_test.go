package executor

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/worker"
)

func TestReadTool(t *testing.T) {
	e := newToolEnv(t)
	var big strings.Builder
	for i := 1; i <= 2500; i++ {
		fmt.Fprintf(&big, "line %d\n", i)
	}
	tests := []struct {
		name    string
		content string
		in      Input
		want    []string
	}{
		{"cat -n", "a\nb\n", nil, []string{"     1\ta\n     2\tb\n"}},
		{"empty", "", nil, []string{"the file exists but the contents are empty"}},
		{"offset past end", "a\n", Input{"offset": 5}, []string{"shorter than the provided offset (5). The file has 1 lines"}},
		{"offset limit", big.String(), Input{"offset": 10, "limit": 2}, []string{"    10\tline 10\n    11\tline 11\n", "pass offset=12"}},
		{"default 2000", big.String(), nil, []string{"  2000\tline 2000\n", "2500 lines in total"}},
		{"long line", strings.Repeat("x", 2100), nil, []string{"line truncated at 2000 characters"}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := e.file(t, fmt.Sprintf("r%d.txt", i), tc.content)
			in := Input{"file_path": p}
			for k, v := range tc.in {
				in[k] = v
			}
			r := e.mustCall(t, "Read", in)
			for _, w := range tc.want {
				if !strings.Contains(text(r), w) {
					t.Errorf("missing %q in %.300q", w, text(r))
				}
			}
			if _, ok := e.s.Reads.Lookup(p); !ok {
				t.Errorf("read not recorded")
			}
		})
	}
	t.Run("too big", func(t *testing.T) {
		p := e.file(t, "wide.txt", strings.Repeat(strings.Repeat("w", 199)+"\n", 2000))
		r := e.mustCall(t, "Read", Input{"file_path": p})
		if !strings.Contains(text(r), "PARTIAL view") {
			t.Fatalf("whole-file read: %.100q", text(r)[len(text(r))-300:])
		}
		if rec, _ := e.s.Reads.Lookup(p); !rec.Partial {
			t.Fatal("partial view recorded as a full read")
		}
		if _, err := e.call(t, "Read", Input{"file_path": p, "offset": 1, "limit": 2000}); err == nil || !strings.Contains(err.Error(), "smaller limit") {
			t.Fatalf("explicit range: %v", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		_, err := e.call(t, "Read", Input{"file_path": e.dir})
		if err == nil || !strings.Contains(err.Error(), "Glob") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("image", func(t *testing.T) {
		p := e.file(t, "i.png", "\x89PNG\r\n\x1a\n0000")
		r := e.mustCall(t, "Read", Input{"file_path": p})
		if r.Content[0].Type != "image" || r.Content[0].MediaType != "image/png" || r.Content[0].Data != base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n0000")) {
			t.Fatalf("content %+v", r.Content)
		}
	})
	t.Run("notebook", func(t *testing.T) {
		nb := `{"cells":[{"cell_type":"markdown","source":["# Title"]},{"cell_type":"code","id":"c1","source":"print(1)","outputs":[{"output_type":"stream","text":["1\n"]}]}],"metadata":{"language_info":{"name":"python"}}}`
		p := e.file(t, "n.ipynb", nb)
		got := text(e.mustCall(t, "Read", Input{"file_path": p}))
		for _, w := range []string{"<cell_type>markdown</cell_type># Title", `<cell id="c1"><language>python</language>print(1)`, "<output cell=\"c1\">\n1\n</output>"} {
			if !strings.Contains(got, w) {
				t.Errorf("missing %q in %q", w, got)
			}
		}
	})
	t.Run("pdf", func(t *testing.T) {
		if _, err := exec.LookPath("pdftotext"); err != nil {
			t.Skip("pdftotext (poppler-utils) not installed")
		}
		p := e.file(t, "d.pdf", string(minimalPDF("Hello from page one")))
		got := text(e.mustCall(t, "Read", Input{"file_path": p}))
		if !strings.Contains(got, "--- Page 1 ---") || !strings.Contains(got, "Hello from page one") {
			t.Fatalf("pdf text %q", got)
		}
		if _, err := e.call(t, "Read", Input{"file_path": p, "pages": "1-30"}); err == nil {
			t.Fatal("30 pages accepted")
		}
	})
	t.Run("unicode fallback", func(t *testing.T) {
		e.file(t, "Shot 10.00\u202fAM.txt", "nbsp\n")
		in := Input{"file_path": filepath.Join(e.dir, "Shot 10.00 AM.txt")}
		// Undecided (no CheckPermissions), Read opens the name asked for only.
		if _, err := e.call(t, "Read", in); errcode.Of(err) != errcode.ErrnoENOENT {
			t.Fatalf("undecided variant read: %v", err)
		}
		c := &Call{Tool: e.defs["Read"], Input: in.Clone(), Session: e.s, Mode: e.s.Mode(), host: e.h}
		facts, err := c.Tool.CheckPermissions(context.Background(), c)
		if err != nil || len(facts.Paths) != 2 || facts.Paths[1].Requested != filepath.Join(e.dir, "Shot 10.00\u202fAM.txt") {
			t.Fatalf("facts %+v %v", facts, err)
		}
		r, err := c.Tool.Call(context.Background(), c, nil)
		if err != nil || !strings.Contains(text(r), "nbsp") {
			t.Fatalf("got %q %v", text(r), err)
		}
	})
}

// minimalPDF builds a one-page PDF showing text, with a correct xref table.
func minimalPDF(text string) []byte {
	content := fmt.Sprintf("BT /F1 12 Tf 72 720 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

func TestReadDevicesRefusedInstantly(t *testing.T) {
	e := newToolEnv(t)
	fifo := filepath.Join(e.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", "/dev/random", "/dev/stdin", "/dev/tty", fifo, "/proc/self/fd/0"} {
		start := time.Now()
		_, err := e.call(t, "Read", Input{"file_path": p})
		if err == nil {
			t.Errorf("Read %s succeeded", p)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Read %s took %v", p, el)
		}
	}
}

func TestWriteTool(t *testing.T) {
	e := newToolEnv(t)
	newPath := filepath.Join(e.dir, "new/dir/f.txt")
	r := e.mustCall(t, "Write", Input{"file_path": newPath, "content": "x\n"})
	if !strings.Contains(text(r), "created") {
		t.Fatalf("create: %q", text(r))
	}
	st, _ := os.Stat(newPath)
	if st.Sys().(*syscall.Stat_t).Uid != nobody {
		t.Fatal("new file not owned by the session owner")
	}
	p := e.file(t, "exist.txt", "old\n")
	os.Chmod(p, 0o640)
	if _, err := e.call(t, "Write", Input{"file_path": p, "content": "new\n"}); errcode.Of(err) != errcode.Stale || !strings.Contains(err.Error(), "Read it first") {
		t.Fatalf("unread overwrite: %v", err)
	}
	e.mustCall(t, "Read", Input{"file_path": p})
	e.mustCall(t, "Write", Input{"file_path": p, "content": "new\n"})
	fi, _ := os.Stat(p)
	if b, _ := os.ReadFile(p); string(b) != "new\n" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("content %q mode %v", b, fi.Mode())
	}
	// Changed on disk since: refused.
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(p, []byte("changed by someone else\n"), 0o640)
	if _, err := e.call(t, "Write", Input{"file_path": p, "content": "mine\n"}); errcode.Of(err) != errcode.Stale || !strings.Contains(err.Error(), "changed on disk") {
		t.Fatalf("stale overwrite: %v", err)
	}
	// A partial read is not enough to overwrite.
	q := e.file(t, "partial.txt", "1\n2\n3\n")
	e.mustCall(t, "Read", Input{"file_path": q, "offset": 2, "limit": 1})
	if _, err := e.call(t, "Write", Input{"file_path": q, "content": "x"}); err == nil || !strings.Contains(err.Error(), "only part") {
		t.Fatalf("partial overwrite: %v", err)
	}
}

func TestEditTool(t *testing.T) {
	e := newToolEnv(t)
	p := e.file(t, "e.go", "package x\n\nfunc a() string { return \u201chi\u201d }\nvar v = 1\nvar v = 1\n")
	if _, err := e.call(t, "Edit", Input{"file_path": p, "old_string": "package x", "new_string": "package y"}); errcode.Of(err) != errcode.Stale {
		t.Fatalf("edit before read: %v", err)
	}
	e.mustCall(t, "Read", Input{"file_path": p})
	cases := []struct {
		name string
		in   Input
		want string
	}{
		{"same", Input{"old_string": "x", "new_string": "x"}, "the same"},
		{"not found", Input{"old_string": "nope", "new_string": "y"}, `"nope"`},
		{"ambiguous", Input{"old_string": "var v = 1", "new_string": "var v = 2"}, "2 times"},
	}
	for _, tc := range cases {
		tc.in["file_path"] = p
		if _, err := e.call(t, "Edit", tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	r := e.mustCall(t, "Edit", Input{"file_path": p, "old_string": `return "hi"`, "new_string": `return "bye"`})
	b, _ := os.ReadFile(p)
	if !strings.Contains(string(b), "return \u201cbye\u201d") || !strings.Contains(text(r), "     3\tfunc a()") {
		t.Fatalf("fuzzy edit: %q\n%s", b, text(r))
	}
	e.mustCall(t, "Edit", Input{"file_path": p, "old_string": "var v = 1", "new_string": "var v = 2", "replace_all": true})
	// MultiEdit: all or nothing.
	if _, err := e.call(t, "MultiEdit", Input{"file_path": p, "edits": []any{
		map[string]any{"old_string": "package x", "new_string": "package z"},
		map[string]any{"old_string": "missing", "new_string": "q"},
	}}); err == nil {
		t.Fatal("MultiEdit with a missing string succeeded")
	}
	if b2, _ := os.ReadFile(p); !bytes.Contains(b2, []byte("package x")) {
		t.Fatal("MultiEdit applied part of its edits")
	}
	// Editing after an external change is refused.
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(p, append(b, "// external\n"...), 0o644)
	if _, err := e.call(t, "Edit", Input{"file_path": p, "old_string": "package x", "new_string": "package q"}); errcode.Of(err) != errcode.Stale {
		t.Fatalf("edit after external change: %v", err)
	}
}

func TestGlobTool(t *testing.T) {
	e := newToolEnv(t)
	base := time.Now().Add(-time.Hour)
	for i := 0; i < 105; i++ {
		p := e.file(t, fmt.Sprintf("src/f%03d.ts", i), "x")
		mt := base.Add(time.Duration(i) * time.Second)
		os.Chtimes(p, mt, mt)
	}
	e.file(t, ".git/HEAD.ts", "x")
	r := e.mustCall(t, "Glob", Input{"pattern": "**/*.{ts,tsx}"})
	lines := strings.Split(text(r), "\n")
	if !strings.HasSuffix(lines[0], "src/f104.ts") || r.Data["truncated"] != true || r.Data["numFiles"] != 100 || strings.Contains(text(r), ".git") {
		t.Fatalf("glob: %v %.200q", r.Data["numFiles"], text(r))
	}
	r = e.mustCall(t, "Glob", Input{"pattern": "*.none", "path": e.dir})
	if text(r) != "No files found" {
		t.Fatalf("none: %q", text(r))
	}
	// A relative path is the cwd's, as the agents' own Glob takes it; one with .. is refused.
	r = e.mustCall(t, "Glob", Input{"pattern": "f00*.ts", "path": "src"})
	if !strings.HasSuffix(text(r), "src/f000.ts") {
		t.Fatalf("relative path: %q", text(r))
	}
	if _, err := e.call(t, "Glob", Input{"pattern": "*", "path": "src/../src"}); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Fatalf("a relative path with ..: %v", err)
	}
}

func TestGrepTool(t *testing.T) {
	e := newToolEnv(t)
	for i := 0; i < 30; i++ {
		e.file(t, fmt.Sprintf("d/f%02d.txt", i), "alpha\nbeta needle\ngamma needle\n")
	}
	e.file(t, ".git/config", "needle")
	r := e.mustCall(t, "Grep", Input{"pattern": "needle"})
	if !strings.HasPrefix(text(r), "Found 30 files") || strings.Contains(text(r), ".git") {
		t.Fatalf("files: %.200q", text(r))
	}
	r = e.mustCall(t, "Grep", Input{"pattern": "needle", "output_mode": "count"})
	if !strings.Contains(text(r), "Found 60 total occurrences across 30 files.") {
		t.Fatalf("count: %.200q", text(r))
	}
	r = e.mustCall(t, "Grep", Input{"pattern": "beta", "output_mode": "content", "-B": 1, "path": filepath.Join(e.dir, "d/f00.txt")})
	if text(r) != "1-alpha\n2:beta needle" {
		t.Fatalf("content: %q", text(r))
	}
	r = e.mustCall(t, "Grep", Input{"pattern": "beta", "output_mode": "content", "-B": 1, "path": "d/f00.txt"})
	if text(r) != "1-alpha\n2:beta needle" {
		t.Fatalf("content, a relative path: %q", text(r))
	}
	// Pagination: disjoint pages that cover everything.
	seen := map[string]bool{}
	for off := 0; off < 60; off += 25 {
		r := e.mustCall(t, "Grep", Input{"pattern": "needle", "output_mode": "content", "head_limit": 25, "offset": off})
		for _, l := range strings.Split(strings.SplitN(text(r), "\n\n[Showing", 2)[0], "\n") {
			if seen[l] {
				t.Fatalf("line %q on two pages", l)
			}
			seen[l] = true
		}
		if off < 50 && r.Data["applied_limit"] != 25 {
			t.Fatalf("page at %d: no applied_limit: %v", off, r.Data)
		}
	}
	if len(seen) != 60 {
		t.Fatalf("pages covered %d lines, want 60", len(seen))
	}
	r = e.mustCall(t, "Grep", Input{"pattern": "needle", "offset": 500})
	if !strings.HasPrefix(text(r), "No entries at this offset") {
		t.Fatalf("past end: %q", text(r))
	}
	if _, err := e.call(t, "Grep", Input{"pattern": "a(b"}); err == nil || !strings.Contains(err.Error(), "regex") {
		t.Fatalf("bad pattern: %v", err)
	}
	// A dir below the searched path that cannot be read is said, not an error: the rest was
	// searched. The searched path itself unreadable is an error.
	locked := e.file(t, "locked/secret.txt", "needle")
	os.Chmod(filepath.Dir(locked), 0)
	defer os.Chmod(filepath.Dir(locked), 0o755)
	r = e.mustCall(t, "Grep", Input{"pattern": "no-such-text"})
	if text(r) != "No files found" || !strings.Contains(strings.Join(r.ExtraMessages, " "), "locked") {
		t.Fatalf("an unreadable dir below: %q %q", text(r), r.ExtraMessages)
	}
	if _, err := e.call(t, "Grep", Input{"pattern": "no-such-text", "path": filepath.Dir(locked)}); err == nil {
		t.Fatal("an unreadable searched path: no error")
	}
}

func TestOnlyUnreadableBelow(t *testing.T) {
	for _, c := range []struct {
		stderr, path string
		want         bool
	}{
		{"rg: /w/a: Permission denied (os error 13)\n", "/w", true},
		{"rg: /w/a: Permission denied (os error 13)\nrg: /w/b/c: Permission denied (os error 13)", "/w/", true},
		{"rg: /w/a: IO error for operation on /w/a: Permission denied (os error 13)", "/w", true},
		{"/w/a: IO error for operation on /w/a: Permission denied (os error 13)", "/w", true},
		{"rg: /w: Permission denied (os error 13)", "/w", false},
		{"rg: /wx/a: Permission denied (os error 13)", "/w", false},
		{"rg: regex parse error", "/w", false},
		{"rg: /w/a: Permission denied (os error 13)\nrg: /w/b: No such file", "/w", false},
		{"", "/w", false},
	} {
		if got := onlyUnreadableBelow(c.stderr, c.path); got != c.want {
			t.Errorf("%q under %s: %v, want %v", c.stderr, c.path, got, c.want)
		}
	}
}

func TestWorkerRestartsAfterDeath(t *testing.T) {
	e := newToolEnv(t)
	p := e.file(t, "a.txt", "a\n")
	e.mustCall(t, "Read", Input{"file_path": p})
	ts := e.h.tools()
	ts.mu.Lock()
	we := ts.workers[e.s.ID]
	ts.mu.Unlock()
	we.mu.Lock()
	we.cancel() // kills the worker's cgroup
	exited := we.exited
	we.mu.Unlock()
	<-exited
	e.mustCall(t, "Read", Input{"file_path": p})
}

// TestWorkerKeptWhenRulesLeaveItsConfinement: a session's worker is kept when new rules make
// no difference to its confinement (the first rules of a session, read through the worker
// that checked its directories: restarting it cost every session's first file call a worker
// start), and replaced when they or a reloaded configuration do, so a path a new Read deny
// names is hidden from it too.
func TestWorkerKeptWhenRulesLeaveItsConfinement(t *testing.T) {
	e := newToolEnv(t)
	secret := e.file(t, "secret.txt", "s3cret\n")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := e.h.Worker(ctx, e.s)
	if err != nil {
		t.Fatal(err)
	}
	rules := func(text ...string) *permission.RuleSet {
		var rs []permission.Rule
		for _, x := range text {
			r, err := permission.ParseRuleFor(x, permission.Deny)
			if err != nil {
				t.Fatal(err)
			}
			r.Source, r.Origin = permission.SourceSession, "session"
			rs = append(rs, r)
		}
		return permission.NewRuleSet(rs, permission.Effective{}, permission.Anchors{Home: e.dir, Cwd: e.dir})
	}
	e.s.SetRuleSet(rules("Bash(rm:*)"))
	if w, err := e.h.Worker(ctx, e.s); err != nil || w != first {
		t.Fatalf("rules that hide and protect nothing more restarted the worker (err %v)", err)
	}
	// A configuration reload rebuilds the rules: one that changes the confinement (here a
	// limit) replaces the worker even when the rules alone would not.
	e.h.SetConfig(config.Sandbox{PidsMax: 77})
	e.s.SetRuleSet(rules("Bash(rm:*)"))
	reloaded, err := e.h.Worker(ctx, e.s)
	if err != nil || reloaded == first {
		t.Fatalf("a reloaded limit kept the worker started under the old one (err %v)", err)
	}
	first = reloaded
	e.s.SetRuleSet(rules("Read(/" + secret + ")")) // "//": an absolute path
	w, err := e.h.Worker(ctx, e.s)
	if err != nil {
		t.Fatal(err)
	}
	if w == first {
		t.Fatal("a new Read deny kept the worker started without it")
	}
	if _, _, err := w.Read(ctx, worker.ReadArgs{Path: secret, Kind: worker.KindText}); err == nil {
		t.Fatal("the new worker read a file a Read deny hides")
	}
}

// TestWorkerUndumpable: the file worker runs as the session's owner but answers the root
// daemon, so it is started undumpable (its real gid apart from its effective one): its owner
// cannot ptrace it into sending the daemon anything (sandbox.TestUndumpable has the mechanism).
func TestWorkerUndumpable(t *testing.T) {
	e := newToolEnv(t)
	e.mustCall(t, "Read", Input{"file_path": e.file(t, "a.txt", "a\n")})
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	found := 0
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if args := strings.Split(string(cmd), "\x00"); err != nil || len(args) < 2 || args[1] != worker.Arg {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue // gone
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) == 5 && f[0] == "Gid:" {
				found++
				if f[1] == f[2] {
					t.Errorf("%s: a file worker whose real gid is its effective one (%s): its owner could ptrace it", p, line)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no file worker found")
	}
}

// TestWriteToolRefusesConfigNamedPaths: a file the user's git config includes
// (~/.gitconfig.local, missing), a hooks dir a repository's core.hooksPath names (.githooks,
// missing), a file the owner's .bashrc sources (env.sh) and a program in a dir .profile puts
// on PATH is not written by Write: the file worker has no sweep to move it aside, and the
// user's next git command or shell would run what it holds.
func TestWriteToolRefusesConfigNamedPaths(t *testing.T) {
	for _, tc := range []struct {
		name    string
		configs map[string]string // relative to the home, the session's dir
		refused []string
	}{
		{"git", map[string]string{".gitconfig": "[include]\n\tpath = ~/.gitconfig.local\n", ".git/config": "[core]\n\thooksPath = .githooks\n"},
			[]string{".gitconfig.local", ".githooks/post-checkout"}},
		{"shell", map[string]string{".bashrc": "[ -f ~/env.sh ] && . ~/env.sh\n", ".profile": "export PATH=\"$HOME/tools:$PATH\"\n"},
			[]string{"env.sh", "tools/ls"}},
		{"agent", map[string]string{".claude/settings.json": `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./hooks/stop.sh"}]}]}}`,
			".mcp.json": `{"mcpServers": {"a": {"command": "node", "args": ["./mcp/server.js"]}}}`},
			[]string{"hooks/stop.sh", "mcp/server.js"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newToolEnv(t)
			for rel, body := range tc.configs {
				p := filepath.Join(e.dir, rel)
				os.MkdirAll(filepath.Dir(p), 0o755)
				os.WriteFile(p, []byte(body), 0o644)
				for q := p; q != e.dir; q = filepath.Dir(q) {
					os.Lchown(q, nobody, nobody)
				}
			}
			for _, rel := range tc.refused {
				p := filepath.Join(e.dir, rel)
				_, err := e.call(t, "Write", Input{"file_path": p, "content": "[core]\n\tfsmonitor = id\n"})
				if errcode.Of(err) != errcode.PermissionDenied {
					t.Errorf("Write %s: %v, want it refused", rel, err)
				}
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", rel)
				}
			}
			e.mustCall(t, "Write", Input{"file_path": filepath.Join(e.dir, "other.txt"), "content": "x\n"})
		})
	}
}

// TestReadSuggestsNoDeniedName: a Read of a missing file suggests near names, but none a Read
// deny rule hides: a guess one letter off would otherwise confirm the hidden name.
func TestReadSuggestsNoDeniedName(t *testing.T) {
	e := newToolEnv(t)
	os.MkdirAll(filepath.Join(e.dir, "cfg"), 0o755)
	os.Chown(filepath.Join(e.dir, "cfg"), nobody, nobody)
	e.file(t, "cfg/id_rsa_prod", "key\n")
	e.file(t, "cfg/id_rsa_pub", "pub\n")
	r, err := permission.ParseRuleFor("Read(./cfg/id_rsa_prod)", permission.Deny)
	if err != nil {
		t.Fatal(err)
	}
	r.Source, r.Origin = permission.SourceSession, "session"
	e.s.SetRuleSet(permission.NewRuleSet([]permission.Rule{r}, permission.Effective{}, permission.Anchors{Home: e.dir, Cwd: e.dir}))
	_, err = e.call(t, "Read", Input{"file_path": filepath.Join(e.dir, "cfg", "id_rsa_pro")})
	if err == nil {
		t.Fatal("a Read of a missing file succeeded")
	}
	if strings.Contains(err.Error(), "id_rsa_prod") {
		t.Errorf("the suggestion names the denied file: %v", err)
	}
}

// TestBashViewCountsAsRead: a single-file view through Bash (cat, head, sed -n, grep) is a
// read for Edit, as the agents count it; cat of the whole file for Write too. A line that
// does more than view one file is none.
func TestBashViewCountsAsRead(t *testing.T) {
	e := newToolEnv(t)
	for _, tc := range []struct {
		cmd         string
		edit, write bool
	}{
		{"cat v.txt", true, true},
		{"head -n 2 v.txt", true, false},
		{"sed -n 1,2p v.txt", true, false},
		{"grep -n line v.txt", true, false},
		{"cat v.txt other.txt", false, false},
		{"cat v.txt > copy.txt", false, false},
	} {
		f := e.file(t, "v.txt", "line one\nline two\n")
		e.file(t, "other.txt", "x\n")
		e.s.Reads.Forget(f)
		if _, err := e.call(t, "Bash", Input{"command": tc.cmd}); err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		rec, ok := e.s.Reads.Lookup(f)
		if ok != tc.edit || ok && rec.Partial == tc.write {
			t.Errorf("%s: read recorded %v (partial %v), want %v (whole %v)", tc.cmd, ok, rec.Partial, tc.edit, tc.write)
		}
		if tc.edit {
			if _, err := e.call(t, "Edit", Input{"file_path": f, "old_string": "line one", "new_string": "LINE ONE"}); err != nil {
				t.Errorf("%s, then Edit: %v", tc.cmd, err)
			}
		}
	}
}

// TestTrailingSlashFilePath: a file path ending in / names no file: Read, Write and Edit
// refuse it rather than use the name without the slash.
func TestTrailingSlashFilePath(t *testing.T) {
	e := newToolEnv(t)
	f := e.file(t, "e.txt", "x\n")
	for _, c := range []struct {
		tool string
		in   Input
	}{
		{"Read", Input{"file_path": f + "/"}},
		{"Write", Input{"file_path": filepath.Join(e.dir, "newdir") + "/", "content": "x"}},
		{"Edit", Input{"file_path": f + "/", "old_string": "x", "new_string": "y"}},
	} {
		if _, err := e.call(t, c.tool, c.in); err == nil || !strings.Contains(err.Error(), "ends in /") {
			t.Errorf("%s %v: %v", c.tool, c.in, err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "newdir")); err == nil {
		t.Error("a Write to newdir/ made a file newdir")
	}
}
