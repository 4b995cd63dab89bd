package sandbox

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/internal/shnest"
	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"
)

// The agents' settings among the protected paths (a project's .claude and .mcp.json, the
// user's ~/.claude/settings.json and ~/.claude.json) are read-only, but they name programs the
// agent runs outside any sandbox: hooks on every tool call (`"command": "./tools/check.sh"`),
// helpers (statusLine, apiKeyHelper), and MCP servers at its start (`"command": "node", "args":
// ["./mcp/server.js"]`). A script so named in a writable dir is as much the agent's code as its
// settings are, so it is protected like them.

// maxAgentSettingsBytes bounds one settings file read to find them; maxAgentNamed bounds what
// they name. Of one file, the commands kept are at most maxAgentCommands, each with at most
// maxAgentArgs arguments and a line of at most maxAgentLine bytes: each call looks at each of
// them again (a stat per argument, a parse per line), and a 4 MB ~/.claude.json of a million
// empty arguments would cost every call that much.
const (
	maxAgentSettingsBytes = 4 << 20
	maxAgentNamed         = 64
	maxAgentCommands      = 256
	maxAgentArgs          = 64
	maxAgentLine          = 8 << 10
)

// keptCommands is cmds within the bounds above: empty words and lines dropped, the rest cut.
func keptCommands(cmds []command) []command {
	var out []command
	for _, c := range cmds {
		if len(out) == maxAgentCommands {
			break
		}
		if c.line != "" {
			if len(c.line) <= maxAgentLine {
				out = append(out, command{line: c.line})
			}
			continue
		}
		var argv []string
		for _, a := range c.argv {
			if a != "" && len(argv) <= maxAgentArgs {
				argv = append(argv, a)
			}
		}
		if len(argv) > 0 {
			out = append(out, command{argv: argv})
		}
	}
	return out
}

var agentSettingsCache = newParsedFiles(func(cmds []command) int {
	n := 0
	for _, c := range cmds {
		n += 64 + len(c.line) + stringsSize(c.argv)
	}
	return n
})

// agentNamedPaths returns the files the agents' settings among candidates (absolute, clean),
// and the user's in home, name as programs or scripts they run: every word of a command that
// names a path (absolute, ~/, $HOME, $CLAUDE_PROJECT_DIR, or relative with a slash), and every
// argument after the program that is a file in the project. Relative names are the project's
// (the dir holding .claude or .mcp.json), where the agent runs them. missing, when set,
// answers for a candidate known not to be there without a look of its own. Run as the caller,
// uid.
func agentNamedPaths(candidates []string, home string, uid uint32, missing func(string) bool) []string {
	var out []string
	add := func(p string) {
		if p != "" && len(out) < maxAgentNamed && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	read := func(file, project string, commands func([]byte) []command) {
		// ~/.claude.json holds the agent's history too, often hundreds of KiB: parsed once
		// for each version of it.
		cmds, ok := agentSettingsCache.get(file, "", uid, maxAgentSettingsBytes, func(b []byte) []command { return keptCommands(commands(b)) })
		if !ok {
			return
		}
		for _, c := range cmds {
			for _, p := range c.paths(project, home) {
				add(p)
			}
		}
	}
	for _, c := range candidates {
		if missing != nil && missing(c) {
			continue
		}
		project, base := filepath.Split(c)
		project = filepath.Clean(project)
		switch base {
		case ".claude":
			read(filepath.Join(c, "settings.json"), project, settingsCommands)
			read(filepath.Join(c, "settings.local.json"), project, settingsCommands)
		case ".mcp.json":
			read(c, project, mcpCommands)
		}
	}
	if home != "" && home != "/" {
		// The user's own: hooks for every project, MCP servers of the user and of each project
		// (started in that project's dir, which is what a relative name there is taken from
		// too; the home is the nearest known).
		read(filepath.Join(home, ".claude/settings.json"), home, settingsCommands)
		read(filepath.Join(home, ".claude.json"), home, mcpCommands)
	}
	return out
}

// command is a program line an agent's settings run: a shell line (hooks, helpers), or a
// program and its arguments (an MCP server).
type command struct {
	line string
	argv []string
}

// settingsCommands are the shell lines a Claude Code settings file runs: hooks of every event
// and the helpers.
func settingsCommands(b []byte) []command {
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
		StatusLine struct {
			Command string `json:"command"`
		} `json:"statusLine"`
		APIKeyHelper        string `json:"apiKeyHelper"`
		AWSAuthRefresh      string `json:"awsAuthRefresh"`
		AWSCredentialExport string `json:"awsCredentialExport"`
		OtelHeadersHelper   string `json:"otelHeadersHelper"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out []command
	for _, groups := range s.Hooks {
		for _, g := range groups {
			for _, h := range g.Hooks {
				out = append(out, command{line: h.Command})
			}
		}
	}
	for _, l := range []string{s.StatusLine.Command, s.APIKeyHelper, s.AWSAuthRefresh, s.AWSCredentialExport, s.OtelHeadersHelper} {
		out = append(out, command{line: l})
	}
	return out
}

// mcpCommands are the MCP servers a .mcp.json or ~/.claude.json starts: its own and, in
// ~/.claude.json, each project's.
func mcpCommands(b []byte) []command {
	type servers map[string]struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}
	var s struct {
		MCPServers servers `json:"mcpServers"`
		Projects   map[string]struct {
			MCPServers servers `json:"mcpServers"`
		} `json:"projects"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var out []command
	add := func(ss servers) {
		for _, v := range ss {
			if v.Command != "" {
				out = append(out, command{argv: append([]string{v.Command}, v.Args...)})
			}
		}
	}
	add(s.MCPServers)
	for _, p := range s.Projects {
		add(p.MCPServers)
	}
	return out
}

// paths are the files c names, absolute and clean: see agentNamedPaths.
func (c command) paths(project, home string) []string {
	words := c.argv
	if c.line != "" {
		words = lineWords(c.line, project, home)
	}
	var out []string
	for i, w := range words {
		if w == "" || strings.Contains(w, dynamicPart) {
			continue
		}
		switch {
		case strings.HasPrefix(w, "~/") && home != "":
			w = filepath.Join(home, w[2:])
		case strings.HasPrefix(w, "-"):
			// --config=./x: the part after = is the path
			_, v, ok := strings.Cut(w, "=")
			if !ok || !strings.Contains(v, "/") {
				continue
			}
			w = v
		}
		if !filepath.IsAbs(w) {
			if !strings.Contains(w, "/") && (i == 0 || !regularFile(filepath.Join(project, w))) {
				continue // a program on PATH, or a word that names no file of the project
			}
			w = filepath.Join(project, w)
		}
		out = append(out, filepath.Clean(w))
	}
	return out
}

// lineWords are the words of every simple command of a shell line, $CLAUDE_PROJECT_DIR and
// $HOME expanded; a word known only when it runs holds dynamicPart.
func lineWords(line, project, home string) []string {
	for _, v := range []string{"${CLAUDE_PROJECT_DIR}", "$CLAUDE_PROJECT_DIR"} {
		line = strings.ReplaceAll(line, v, project)
	}
	if shnest.TooDeep(line) {
		return nil // as a line that does not parse
	}
	f, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil {
		return nil
	}
	var out []string
	syntax.Walk(f, func(node syntax.Node) bool {
		if call, ok := node.(*syntax.CallExpr); ok {
			for _, w := range call.Args {
				if s, ok := wordText(w, home); ok {
					out = append(out, s)
				}
			}
		}
		return true
	})
	return out
}

// regularFile reports whether p is a regular file, links followed.
func regularFile(p string) bool {
	var st unix.Stat_t
	return unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}

// AgentNamedPaths is what the agents' settings among candidates and in home name as programs
// they run (agentNamedPaths), read as the caller: for the daemon's own check before a file
// tool writes.
func AgentNamedPaths(uid, gid uint32, groups []uint32, candidates []string, home string) ([]string, error) {
	var out []string
	err := asCaller(uid, gid, groups, func() { out = agentNamedPaths(candidates, home, uid, nil) })
	return out, err
}
