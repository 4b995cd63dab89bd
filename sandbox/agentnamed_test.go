package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeFiles writes each file of files (absolute path: content), its dirs made.
func writeFiles(t *testing.T, files map[string]string) {
	t.Helper()
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAgentNamedPaths: the scripts the agents' settings run, as hooks, helpers and MCP servers,
// in the forms settings write them; programs on PATH, option values and names known only at
// run time are left out.
func TestAgentNamedPaths(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	proj := filepath.Join(home, "proj")
	writeFiles(t, map[string]string{
		filepath.Join(proj, ".claude/settings.json"): `{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [
			{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/tools/check.sh --strict"},
			{"type": "command", "command": "python3 scripts/lint.py --config=./lint.toml"},
			{"type": "command", "command": "cd \"${CLAUDE_PROJECT_DIR}\" && node hook.js 3"},
			{"type": "command", "command": "$DYNAMIC/skip.sh; /usr/bin/true"}]}]},
			"statusLine": {"type": "command", "command": "~/bin/status.sh"}}`,
		filepath.Join(proj, ".claude/settings.local.json"): `{"apiKeyHelper": "./keys/helper.sh"}`,
		filepath.Join(proj, ".mcp.json"): `{"mcpServers": {"a": {"command": "node", "args": ["./mcp/server.js", "--port", "3"]},
			"b": {"command": "./bin/srv"}, "c": {"type": "http", "url": "http://x"}}}`,
		filepath.Join(proj, "hook.js"):               `// a hook`,
		filepath.Join(home, ".claude/settings.json"): `{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "bash ~/notify/done.sh"}]}]}}`,
		filepath.Join(home, ".claude.json"):          `{"projects": {"/x": {"mcpServers": {"d": {"command": "python3", "args": ["` + home + `/proj/py/server.py"]}}}}}`,
	})
	got := agentNamedPaths([]string{filepath.Join(proj, ".claude"), filepath.Join(proj, ".mcp.json"), filepath.Join(proj, ".git/config")}, home, 0, nil)
	for _, want := range []string{"proj/tools/check.sh", "proj/scripts/lint.py", "proj/lint.toml", "proj/hook.js", "bin/status.sh",
		"proj/keys/helper.sh", "proj/mcp/server.js", "proj/bin/srv", "notify/done.sh", "proj/py/server.py"} {
		if !slices.Contains(got, filepath.Join(home, want)) {
			t.Errorf("%s not among %v", want, got)
		}
	}
	for _, p := range got {
		if strings.Contains(p, dynamicPart) || strings.Contains(p, "skip.sh") || !filepath.IsAbs(p) ||
			slices.Contains([]string{"node", "python3", "3", "--port"}, filepath.Base(p)) {
			t.Errorf("a program on PATH, an option, a name known only at run time, or not absolute: %q", p)
		}
	}
	if !slices.Contains(got, "/usr/bin/true") {
		t.Errorf("/usr/bin/true not among %v (the plan keeps only those it can write)", got)
	}
}

// TestAgentNamedPathsProtected: in a session rooted at a project, what the project's agent
// settings run as a hook or an MCP server is read-only, and such a script a call makes is moved
// aside, however the call spells the name.
func TestAgentNamedPathsProtected(t *testing.T) {
	t.Parallel()
	s := newTestSandbox(t, Config{})
	f := newProtectFixture(t)
	f.write(t, map[string]string{
		filepath.Join(f.repo, ".claude", "settings.json"): `{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "./tools/check.sh"}]}]}}`,
		filepath.Join(f.repo, ".mcp.json"):                `{"mcpServers": {"a": {"command": "node", "args": ["mcp/server.js"]}}}`,
		filepath.Join(f.repo, "tools", "check.sh"):        "#!/bin/sh\nexit 0\n",
		filepath.Join(f.repo, "src", "a.go"):              "package a\n",
	})
	chownR(t, filepath.Dir(f.home))
	const script = `t=tools; ( echo id >> ${t}/check.sh ) 2>/dev/null && echo 'ATTACK-WORKED hook script'; ` +
		`mkdir -p m""cp && echo 'require("child_process").execSync("id")' > mcp/server.js; ` +
		`echo ok >> src/a.go && echo done`
	f.attack(t, s, script, f.repo, f.repo)
	delete(f.files, filepath.Join(f.repo, "src", "a.go")) // the project's own file: written
	f.unchanged(t)
	if _, err := os.Lstat(filepath.Join(f.repo, "mcp", "server.js")); err == nil {
		t.Error("mcp/server.js, the project's MCP server, is still there after the call")
	}
}

// FuzzAgentNames: any settings file and any command line in it is read without a panic (the
// plan runs in the daemon), and names only absolute, clean paths with nothing unknown in them.
func FuzzAgentNames(f *testing.F) {
	for _, s := range []string{
		`"$CLAUDE_PROJECT_DIR"/a.sh x`, `python3 s/l.py --c=./x`, `cd "${CLAUDE_PROJECT_DIR}" && node h.js`,
		`$X/y; ~/b/s.sh`, `a | b > c; (d/e &)`, `f() { g/h; }`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, c := range []command{{line: line}, {argv: strings.Fields(line)}} {
			for _, p := range c.paths("/w", "/home/u") {
				if !filepath.IsAbs(p) || strings.Contains(p, dynamicPart) || filepath.Clean(p) != p {
					t.Fatalf("%q names %q", line, p)
				}
			}
		}
		settingsCommands([]byte(line))
		mcpCommands([]byte(line))
	})
}

// TestAgentSettingsBounded: what the plan keeps of an agent's settings file, and what the cache
// of them holds, is bounded whatever the file holds: a 4 MB ~/.claude.json of a million empty
// arguments parsed to 22 MB, kept for each version of it, and each call stat'ed every argument.
func TestAgentSettingsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"mcpServers": {`)
	for i := range 300 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"s%d": {"command": "node", "args": ["./a.js"%s]}`, i, strings.Repeat(`, "", "x"`, 100))
	}
	b.WriteString(`}, "hooks": {}}`)
	cmds := keptCommands(mcpCommands([]byte(b.String())))
	if len(cmds) != maxAgentCommands {
		t.Errorf("%d commands kept, want %d", len(cmds), maxAgentCommands)
	}
	for _, c := range cmds {
		if len(c.argv) > maxAgentArgs+1 || slices.Contains(c.argv, "") {
			t.Fatalf("a command kept %d arguments (empty ones among them: %v)", len(c.argv), slices.Contains(c.argv, ""))
		}
	}
	long := keptCommands([]command{{line: strings.Repeat("x", maxAgentLine+1)}, {line: "./ok.sh"}})
	if len(long) != 1 || long[0].line != "./ok.sh" {
		t.Errorf("lines kept: %d", len(long))
	}

	// The cache: versions of a file add up to maxParsedBytes at most, and an answer larger
	// than a quarter of it is used, not kept.
	c := newParsedFiles(func(ss []string) int { return stringsSize(ss) })
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	big := func([]byte) []string { return make([]string, maxParsedBytes/4/16+1) }
	small := func([]byte) []string { return make([]string, maxParsedBytes/8/16) }
	for i := range 20 {
		if err := os.WriteFile(f, []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(f, old, old.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stampSlack) // the ctime (now) must be past its tick to be kept
		parse := small
		if i == 0 {
			parse = big
		}
		if _, ok := c.get(f, "", 0, 1<<20, parse); !ok {
			t.Fatal("not read")
		}
		if c.bytes > maxParsedBytes || i == 0 && len(c.m) != 0 {
			t.Fatalf("version %d: the cache holds %d bytes in %d answers", i, c.bytes, len(c.m))
		}
	}
}
