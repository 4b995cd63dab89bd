package sandbox

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Tools' configs in the home are protected (ProtectedInHome), but they name programs the tool
// runs by their path: npm's script-shell and node-options --require, kubectl's exec credential
// plugin, cargo's rustc-wrapper, linker, runner and credential providers, the AWS CLI's
// credential_process, gpg-agent's pinentry-program, psql's \! and PAGER, the go command's CC
// and GOFLAGS=-toolexec (~/.config/go/env), docker's CLI plugin dirs, terraform's provider
// overrides and plugin cache, wget's use_askpass, gpg's helpers, what readline's inputrc
// includes, less's input filter (lesskey), man's DEFINE programs, what sqlite3's start-up
// commands read, load and run, and perl -d's .perldb. Such a program in a
// writable dir is as much the tool's as its config is: the user's next `npm run`, `kubectl get
// pods` or `cargo build` on the host runs what a call put there. It is protected like the
// config.

// toolConfigs are those configs, relative to the home, each with its parser: src, the home,
// and the dir of the file (what relative names in it are resolved against, where the tool
// does so).
var toolConfigs = map[string]func(src []byte, home, dir string) toolNames{
	".npmrc":                npmrcNames,
	".kube/config":          kubeConfigNames,
	".cargo/config.toml":    cargoConfigNames,
	".cargo/config":         cargoConfigNames,
	".aws/config":           awsConfigNames,
	".gnupg/gpg-agent.conf": gpgAgentNames,
	".psqlrc":               psqlrcNames,
	".config/go/env":        goEnvNames,
	".docker/config.json":   dockerConfigNames,
	".terraformrc":          terraformrcNames,
	".wgetrc":               wgetrcNames,
	".gnupg/gpg.conf":       gpgConfNames,
	".inputrc":              inputrcNames,
	".lesskey":              lesskeyNames,
	".config/lesskey":       lesskeyNames,
	".manpath":              manpathNames,
	".sqliterc":             sqlitercNames,
	".perldb":               perldbNames,
}

// toolNames is what one tool config names: programs and files the tool runs or loads, and
// files it reads as more of its config (psql's \i), read in turn.
type toolNames struct {
	named, includes []string
}

const (
	// maxToolConfigFiles bounds the files read, the included ones (psql's, readline's,
	// sqlite's) with them: about twice the configs a home may hold.
	maxToolConfigFiles = 40
	// maxKubeConfigBytes bounds ~/.kube/config, which holds each cluster's certificates; the
	// others are bounded as start-up files are (maxShellFileBytes).
	maxKubeConfigBytes = 4 << 20
)

// errToolConfigTooLarge is a tool config larger than is read: what it names could not be
// protected.
var errToolConfigTooLarge = fmt.Errorf("%w: a tool's config in the home (npm, kubectl, cargo, aws, gpg, psql, go, docker, terraform, wget, readline, less, man, sqlite, perl) is larger than sandboxd reads on every call to protect the programs it names; shorten it", ErrBadSpec)

var toolNamesCache = newParsedFiles(func(n toolNames) int { return stringsSize(n.named) + stringsSize(n.includes) })

// movedConfig is a config a start-up file moves out of its place in the home (`export
// KUBECONFIG=~/p/kubeconfig`, GIT_CONFIG_GLOBAL): kind is that place, "git" or a key of
// toolConfigs, whose reader reads it. The file itself is protected as the variable's value
// (configVars); what it names is read here, as the home's config's would be.
type movedConfig struct{ kind, path string }

// gitKind is a movedConfig's kind for git's config.
const gitKind = "git"

// movedToolConfigs are the variables that move one of toolConfigs, with its key; dirFiles,
// where the variable names a dir, are the config's names in it.
var movedToolConfigs = map[string]struct {
	key      string
	dirFiles []string
	// also is a second config in the same dir, under its own name (GNUPGHOME's gpg.conf).
	also string
}{
	"KUBECONFIG":            {key: ".kube/config"}, // a colon list, each one read
	"NPM_CONFIG_USERCONFIG": {key: ".npmrc"},
	"npm_config_userconfig": {key: ".npmrc"},
	"AWS_CONFIG_FILE":       {key: ".aws/config"},
	"PSQLRC":                {key: ".psqlrc"},
	"CARGO_HOME":            {key: ".cargo/config.toml", dirFiles: []string{"config.toml", "config"}},
	"GNUPGHOME":             {key: ".gnupg/gpg-agent.conf", dirFiles: []string{"gpg-agent.conf"}, also: ".gnupg/gpg.conf"},
	"GOENV":                 {key: ".config/go/env"},
	"DOCKER_CONFIG":         {key: ".docker/config.json", dirFiles: []string{"config.json"}},
	"TF_CLI_CONFIG_FILE":    {key: ".terraformrc"},
	"WGETRC":                {key: ".wgetrc"},
	"INPUTRC":               {key: ".inputrc"},
	"LESSKEYIN":             {key: ".lesskey"},
	"XDG_CONFIG_HOME":       {key: ".config/go/env", dirFiles: []string{"go/env"}},
}

// movedTo is the configs a start-up file's NAME=v moves (movedToolConfigs): each entry of v
// whose text is known and that is absolute or the home's, nil for any other name.
func movedTo(name, v, home string) []movedConfig {
	mt, ok := movedToolConfigs[name]
	if !ok {
		return nil
	}
	var out []movedConfig
	for _, e := range pathEntries(v, home) {
		if strings.Contains(e, dynamicPart) || !(filepath.IsAbs(e) || strings.HasPrefix(e, home+"/")) {
			continue
		}
		if mt.dirFiles == nil {
			out = append(out, movedConfig{mt.key, filepath.Clean(e)})
		}
		for _, f := range mt.dirFiles {
			out = append(out, movedConfig{mt.key, filepath.Join(e, f)})
		}
		if mt.also != "" {
			out = append(out, movedConfig{mt.also, filepath.Join(e, filepath.Base(mt.also))})
		}
	}
	return out
}

// movedKinds splits moved into git's configs and the tools'.
func movedKinds(moved []movedConfig) (git []string, tools []movedConfig) {
	for _, m := range moved {
		if m.kind == gitKind {
			git = appendNew(git, m.path)
		} else if !slices.Contains(tools, m) {
			tools = append(tools, m)
		}
	}
	return git, tools
}

// toolConfigNamedPaths returns what toolConfigs in home name (see above), absolute and clean.
// missing, when set, answers for a path known not to be there. Past maxToolConfigFiles files,
// maxNamedPaths names or a config's size bound it fails. Run as the caller, uid.
func toolConfigNamedPaths(home string, uid uint32, missing func(string) bool) ([]string, error) {
	if home == "" || home == "/" {
		return nil, nil
	}
	var starts []movedConfig
	for rel := range toolConfigs {
		starts = append(starts, movedConfig{rel, filepath.Join(home, rel)})
	}
	return readToolConfigs(starts, home, uid, missing)
}

// movedNamedPaths is what the configs start-up files moved name (movedConfig), each read as
// the config it stands for. Run as the caller, uid.
func movedNamedPaths(moved []movedConfig, home string, uid uint32) ([]string, error) {
	git, tools := movedKinds(moved)
	named, err := readToolConfigs(tools, home, uid, nil)
	if err != nil || len(git) == 0 {
		return named, err
	}
	more, err := gitNamedPaths(nil, git, home)
	return append(named, more...), err
}

// readToolConfigs reads the configs starts, each with its kind's parser, and the files they
// include, for what they name.
func readToolConfigs(starts []movedConfig, home string, uid uint32, missing func(string) bool) ([]string, error) {
	if len(starts) == 0 {
		return nil, nil
	}
	var paths []string
	kinds := map[string]string{}
	for _, c := range starts {
		if _, known := kinds[c.path]; !known {
			paths = append(paths, c.path)
			kinds[c.path] = c.kind
		}
	}
	var tooLarge error
	named, err := followNamed(paths, maxToolConfigFiles, missing, func(p string, out *namedSet, read func(string)) bool {
		kind := kinds[p]
		limit := int64(maxShellFileBytes)
		if kind == ".kube/config" {
			limit = maxKubeConfigBytes
		}
		// The cache's key holds the kind: one file may be read as two tools' configs.
		n, ok := toolNamesCache.get(p, home+"\x00"+kind, uid, limit, func(b []byte) toolNames { return toolConfigs[kind](b, home, filepath.Dir(p)) })
		if !ok {
			var st unix.Stat_t
			if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size > limit {
				tooLarge = fmt.Errorf("%w (%s)", errToolConfigTooLarge, p)
			}
			return false
		}
		for _, c := range n.named {
			out.add(c)
		}
		for _, c := range n.includes {
			out.add(c)
			// Read as the same tool's; only the home's (the system's cannot be written, and
			// each read counts against maxToolConfigFiles).
			if strings.HasPrefix(c, home+"/") {
				if _, known := kinds[c]; !known {
					kinds[c] = kind
				}
				read(c)
			}
		}
		return true
	})
	if tooLarge != nil {
		return nil, tooLarge
	}
	return named, err
}

// toolPath is w as an absolute, clean path where it names one (absolute, ~/, $HOME/,
// ${HOME}/; relative to base where base is set and w holds a /), else "". The home itself
// and / are not a program's path.
func toolPath(w, home, base string) string {
	p := homePath(w, home)
	if p == "" && strings.Contains(w, "/") {
		p = relPath(w, base)
	}
	if p == home || p == "/" {
		return ""
	}
	return p
}

// relPath is the relative name w joined to base, "" where base is "" or w is not a name by
// itself (another variable's value, another user's home).
func relPath(w, base string) string {
	if base == "" || w == "" || strings.HasPrefix(w, "$") || strings.HasPrefix(w, "~") {
		return ""
	}
	return filepath.Join(base, w)
}

// nodeLoadOptions are node's options whose value is code it loads, as --option=value.
var nodeLoadOptions = map[string]bool{"--require": true, "-r": true, "--import": true, "--loader": true,
	"--experimental-loader": true}

// commandPaths are the paths a command line names: each word holding a / that is not an option
// (and the value of a nodeLoadOptions' --require=value), the first relative to base where the
// tool resolves the program so (base "": not at all).
func commandPaths(line, home, base string) []string {
	var out []string
	words := strings.FieldsFunc(line, func(r rune) bool { return strings.ContainsRune(" \t;|&()<>`\"'", r) })
	for i, w := range words {
		if strings.HasPrefix(w, "-") {
			o, v, ok := strings.Cut(w, "=") // --require=/p/x
			if !ok || !nodeLoadOptions[o] {
				continue
			}
			w = v
		}
		if !strings.Contains(w, "/") {
			continue
		}
		b := ""
		if i == 0 {
			b = base
		}
		if p := toolPath(w, home, b); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// iniKeyValue splits an ini line (npmrc, aws config) into its lowercased key and value, false
// for a comment, a section or a line without =.
func iniKeyValue(line string) (string, string, bool) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
		return "", "", false
	}
	k, v, ok := strings.Cut(line, "=")
	if !ok {
		return "", "", false
	}
	return strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v), true
}

// npmKeys are npm's settings whose value is a program (with its arguments) npm runs, or code
// node loads (node-options --require, init-module).
var npmKeys = map[string]bool{"script-shell": true, "shell": true, "editor": true, "git": true, "browser": true,
	"viewer": true, "node-options": true, "init-module": true}

// npmrcNames reads ~/.npmrc (ini: key = value, a value maybe quoted). A relative name is the
// cwd's, not seen.
func npmrcNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		k, v, ok := iniKeyValue(line)
		switch k = strings.ReplaceAll(k, "_", "-"); {
		case npmKeys[k]:
			n.named = append(n.named, commandPaths(v, home, "")...)
		case ok && (k == "globalconfig" || k == "userconfig"):
			// More of npm's config, read as this one is.
			if p := toolPath(strings.Trim(v, `'"`), home, ""); p != "" {
				n.includes = append(n.includes, p)
			}
		}
	}
	return n
}

// kubeConfigNames reads a kubeconfig (YAML, or JSON): each exec plugin's command (relative with a
// /: to the config's dir, as kubectl resolves it) and the paths among its args, and an auth
// provider's cmd-path. A line scan: a command key anywhere is taken for one.
func kubeConfigNames(src []byte, home, dir string) toolNames {
	var n toolNames
	argsIndent := -1 // the indent of an args: key whose block list follows
	for _, line := range strings.Split(string(src), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' {
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " \t"))
		if argsIndent >= 0 {
			if item, ok := strings.CutPrefix(t, "-"); ok && indent >= argsIndent {
				if p := toolPath(yamlScalar(item), home, ""); p != "" {
					n.named = append(n.named, p)
				}
				continue
			}
			argsIndent = -1
		}
		for _, m := range kubeCommandKey.FindAllStringSubmatch(t, -1) {
			if p := toolPath(yamlScalar(m[2]), home, dir); p != "" {
				n.named = append(n.named, p)
			}
		}
		for _, m := range kubeArgsKey.FindAllStringSubmatch(t, -1) {
			// A flow list: [a, "/p/x"], JSON's on one line.
			for _, a := range strings.Split(m[1], ",") {
				if p := toolPath(yamlScalar(a), home, ""); p != "" {
					n.named = append(n.named, p)
				}
			}
		}
		if kubeArgsBlock.MatchString(t) {
			argsIndent = indent
		}
	}
	return n
}

// kubeCommandKey is a command or cmd-path key and its scalar, anywhere in a line (YAML, or JSON
// on one line); kubeArgsKey an args key and its flow list; kubeArgsBlock an args key whose
// block list follows.
var (
	kubeCommandKey = regexp.MustCompile(`(?:^|[\s{,"'-])["']?(command|cmd-path)["']?\s*:\s*("[^"]*"|'[^']*'|[^\s,}#]+)`)
	kubeArgsKey    = regexp.MustCompile(`(?:^|[\s{,"'-])["']?args["']?\s*:\s*\[([^\]]*)\]`)
	kubeArgsBlock  = regexp.MustCompile(`^(?:-\s+)?["']?args["']?\s*:\s*(?:#.*)?$`)
)

// yamlScalar is a YAML (or JSON) scalar's text: quotes, a trailing comment or comma taken off.
func yamlScalar(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
		if end := strings.IndexByte(v[1:], v[0]); end >= 0 {
			return v[1 : end+1]
		}
		return v[1:]
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(strings.TrimRight(v, ", "))
}

// cargoPathKeys are cargo's settings whose value is one program's path; cargoCommandKeys' are
// a program and its arguments, as a string or an array. Not paths overrides or a vendored
// source's directory: crates' source, the user's own projects, which a session there writes.
var (
	cargoPathKeys = map[string]bool{"rustc": true, "rustc-wrapper": true, "rustc-workspace-wrapper": true, "rustdoc": true,
		"linker": true}
	cargoCommandKeys = map[string]bool{"runner": true, "credential-provider": true}
)

// cargoConfigNames reads a cargo config (TOML, a line scan: keys may be dotted, arrays may span
// lines). Cargo resolves a relative program holding a / (and any relative dir) against the
// dir holding .cargo: the home, for the home's.
func cargoConfigNames(src []byte, home, dir string) toolNames {
	var n toolNames
	root := filepath.Dir(dir)
	lines := strings.Split(string(src), "\n")
	section := ""
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if strings.HasPrefix(t, "[") {
			// A table's header ([target.'cfg(unix)'], [[bin]]): no key starts with [.
			section = strings.TrimSpace(strings.Trim(t, "[]"))
			continue
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok || strings.HasPrefix(t, "#") {
			continue
		}
		v = strings.TrimSpace(v)
		if strings.HasPrefix(v, "[") {
			// An array, maybe over several lines up to its ].
			for !strings.Contains(stripTOMLStrings(v), "]") && i+1 < len(lines) {
				i++
				v += " " + strings.TrimSpace(lines[i])
			}
		}
		key := strings.TrimSpace(k)
		alias := strings.Contains(section+"."+key, "credential-alias") // [credential-alias] name = …, credential-alias.name = …
		if j := strings.LastIndex(key, "."); j >= 0 {
			key = key[j+1:]
		}
		key = strings.Trim(strings.TrimSpace(key), `"'`)
		strs := tomlStrings(v)
		switch {
		case cargoPathKeys[key]:
			for _, s := range strs {
				if p := toolPath(s, home, root); p != "" {
					n.named = append(n.named, p)
				}
			}
		case key == "rustflags" || key == "rustdocflags" || section == "env" || key == "directory" || key == "local-registry":
			// -C linker=/p/ld, -Clink-arg=-fuse-ld=/p/ld; [env] LD_PRELOAD for rustc and build
			// scripts; a [source] replaced by a dir whose crates' build.rs runs at the next build.
			for _, s := range strs {
				n.named = append(n.named, pathWords(s, home)...)
				if p := toolPath(s, home, root); p != "" && !strings.HasPrefix(s, "-") {
					n.named = append(n.named, p)
				}
			}
		case key == "global-credential-providers":
			for _, s := range strs {
				n.named = append(n.named, commandPaths(s, home, root)...)
			}
		case cargoCommandKeys[key] || alias:
			if strings.HasPrefix(v, "[") {
				for j, s := range strs {
					b := ""
					if j == 0 {
						b = root
					}
					if p := toolPath(s, home, b); p != "" {
						n.named = append(n.named, p)
					}
				}
			} else {
				for _, s := range strs {
					n.named = append(n.named, commandPaths(s, home, root)...)
				}
			}
		}
	}
	return n
}

// tomlStrings are the TOML strings in v ("…" with its escapes, '…' literal), up to a comment.
func tomlStrings(v string) []string {
	var out []string
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '#':
			return out
		case '\'':
			end := strings.IndexByte(v[i+1:], '\'')
			if end < 0 {
				return out
			}
			out = append(out, v[i+1:i+1+end])
			i += end + 1
		case '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(v) && v[j] != '"'; j++ {
				if v[j] == '\\' && j+1 < len(v) {
					j++
				}
				b.WriteByte(v[j])
			}
			if j >= len(v) {
				return out
			}
			out = append(out, b.String())
			i = j
		}
	}
	return out
}

// stripTOMLStrings is v without its strings' text, to find an array's end.
func stripTOMLStrings(v string) string {
	for _, s := range tomlStrings(v) {
		v = strings.Replace(v, s, "", 1)
	}
	return v
}

// awsConfigNames reads ~/.aws/config (ini): each profile's credential_process, a command line
// the CLI and SDKs run for credentials.
func awsConfigNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		if k, v, ok := iniKeyValue(line); ok && k == "credential_process" {
			n.named = append(n.named, commandPaths(v, home, "")...)
		}
	}
	return n
}

// goEnvKeys are the go command's settings (`go env -w`) whose value runs a program: the C
// compilers and tools cgo runs, and flags given to every build (GOFLAGS=-toolexec=/p/x, a
// -exec for go run and go test) and to the C compilers (-fplugin=, -B). GOROOT is the
// toolchain itself, protected whole.
var goEnvKeys = map[string]bool{"CC": true, "CXX": true, "FC": true, "AR": true, "PKG_CONFIG": true, "GOFLAGS": true,
	"CGO_CFLAGS": true, "CGO_CPPFLAGS": true, "CGO_CXXFLAGS": true, "CGO_FFLAGS": true, "CGO_LDFLAGS": true, "GOROOT": true,
	// A module proxy in a dir (file:///p/proxy): the modules every later build compiles.
	"GOPROXY": true}

// goEnvNames reads the go command's env file (KEY=VALUE lines, as `go env -w` writes them).
func goEnvNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || !goEnvKeys[k] {
			continue
		}
		n.named = append(n.named, commandPaths(v, home, "")...)
		n.named = append(n.named, pathWords(v, home)...)
	}
	return n
}

// dockerConfigNames reads the docker CLI's config.json: the dirs it takes CLI plugins from
// (cliPluginsExtraDirs), which docker runs on any command (docker --help lists them by running
// each). Protected whole.
func dockerConfigNames(src []byte, home, _ string) toolNames {
	var c struct {
		Dirs []string `json:"cliPluginsExtraDirs"`
	}
	var n toolNames
	if json.Unmarshal(src, &c) != nil {
		// A config docker cannot read either: every path-like word, to be sure.
		n.named = pathWords(string(src), home)
		return n
	}
	for _, d := range c.Dirs {
		if p := toolPath(d, home, ""); p != "" {
			n.named = append(n.named, p)
		}
	}
	return n
}

// terraformrcNames reads terraform's CLI config (HCL): every path in it is where terraform
// takes providers from and runs them (dev_overrides, a filesystem_mirror, plugin_cache_dir),
// so each path-like word is taken.
func terraformrcNames(src []byte, home, _ string) toolNames {
	return toolNames{named: pathWords(string(src), home)}
}

// wgetrcNames reads ~/.wgetrc (key = value): the program use_askpass runs.
func wgetrcNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		k, v, ok := iniKeyValue(line)
		if ok && strings.NewReplacer("_", "", "-", "").Replace(k) == "useaskpass" {
			n.named = append(n.named, commandPaths(v, home, "")...)
		}
	}
	return n
}

// gpgConfNames reads gpg.conf (an option, white space, its value): the helper programs gpg
// starts (the agent, dirmngr) and the viewer it runs for a photo id.
func gpgConfNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		k, v, _ := strings.Cut(strings.Replace(strings.TrimSpace(line), "\t", " ", 1), " ")
		switch k {
		case "agent-program", "dirmngr-program", "keyboxd-program", "photo-viewer", "exec-path":
			n.named = append(n.named, commandPaths(strings.TrimSpace(v), home, "")...)
		}
	}
	return n
}

// inputrcNames reads readline's inputrc: the files its $include lines read as more of it.
// (Its macros type text into the shell at a key press, which is why the file is protected.)
func inputrcNames(src []byte, home, dir string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		if f, ok := strings.CutPrefix(strings.TrimSpace(line), "$include"); ok {
			if p := toolPath(strings.TrimSpace(f), home, dir); p != "" {
				n.includes = append(n.includes, p)
			}
		}
	}
	return n
}

// lessEnv are the variables a lesskey file's #env section sets for less that run a program.
var lessEnv = map[string]bool{"LESSOPEN": true, "LESSCLOSE": true, "VISUAL": true, "EDITOR": true, "SHELL": true, "LESSEDIT": true}

// lesskeyNames reads a lesskey source file: the programs its #env section's LESSOPEN (an input
// filter, run on every file less opens), editor and shell name.
func lesskeyNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && lessEnv[strings.TrimSpace(k)] {
			n.named = append(n.named, commandPaths(strings.TrimLeft(strings.TrimSpace(v), "|-"), home, "")...)
		}
	}
	return n
}

// manpathNames reads man's ~/.manpath: the programs its DEFINE lines give man to run (the
// pager, nroff, the browser, each formatter).
func manpathNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "DEFINE" {
			n.named = append(n.named, commandPaths(strings.Join(f[2:], " "), home, "")...)
		}
	}
	return n
}

// sqlitercNames reads ~/.sqliterc, the dot commands sqlite3 runs at start: the files .read
// reads as more of them, the extensions .load loads, the commands .shell and .system run, and
// an output piped to a program (.output |cmd).
func sqlitercNames(src []byte, home, dir string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		rest := strings.Join(f[1:], " ")
		switch f[0] {
		case ".read":
			if p := toolPath(strings.Trim(f[1], `'"`), home, dir); p != "" {
				n.includes = append(n.includes, p)
			}
		case ".load":
			n.named = append(n.named, commandPaths(strings.Trim(rest, `'"`), home, "")...)
		case ".shell", ".system", ".output", ".once", ".excel":
			n.named = append(n.named, commandPaths(strings.TrimLeft(strings.Trim(rest, `'"`), "|"), home, "")...)
		}
	}
	return n
}

// perldbNames reads ~/.perldb, which perl -d runs as Perl: every path in it.
func perldbNames(src []byte, home, _ string) toolNames {
	return toolNames{named: pathWords(string(src), home)}
}

// gpgAgentNames reads gpg-agent.conf (an option, white space, its value): the programs the
// agent runs to ask for a passphrase and to reach a card or a TPM.
func gpgAgentNames(src []byte, home, _ string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		t := strings.TrimSpace(line)
		k, v, _ := strings.Cut(strings.Replace(t, "\t", " ", 1), " ")
		switch k {
		case "pinentry-program", "scdaemon-program", "tpm2daemon-program":
			if p := toolPath(strings.TrimSpace(v), home, ""); p != "" {
				n.named = append(n.named, p)
			}
		}
	}
	return n
}

// psqlEnv are the variables psql's \setenv gives a command psql runs by (\! with no command
// runs SHELL).
var psqlEnv = map[string]bool{"PAGER": true, "PSQL_PAGER": true, "PSQL_WATCH_PAGER": true, "EDITOR": true,
	"PSQL_EDITOR": true, "VISUAL": true, "SHELL": true, "LD_PRELOAD": true, "BASH_ENV": true, "ENV": true}

// psqlrcNames reads ~/.psqlrc: a \! shell line, a \setenv of psqlEnv, a `…` command in a
// meta-command's arguments, output piped to a command (\o |cmd, \g |cmd, \copy … program
// 'cmd'), and a file \i (\ir: relative to this file's dir) reads as more of it.
func psqlrcNames(src []byte, home, dir string) toolNames {
	var n toolNames
	for _, line := range strings.Split(string(src), "\n") {
		if i := strings.Index(line, `\!`); i >= 0 {
			n.named = append(n.named, commandPaths(line[i+2:], home, "")...)
			line = line[:i]
		}
		if !strings.Contains(line, `\`) {
			continue // SQL: COPY … PROGRAM runs on the server
		}
		parts := strings.Split(line, "`")
		for i := 1; i < len(parts); i += 2 {
			n.named = append(n.named, commandPaths(parts[i], home, "")...)
		}
		if i := strings.Index(line, "|"); i >= 0 {
			n.named = append(n.named, commandPaths(line[i+1:], home, "")...)
		}
		words := strings.Fields(line)
		for i, w := range words {
			rest := words[i+1:]
			switch w {
			case `\setenv`:
				if len(rest) > 1 && psqlEnv[rest[0]] {
					n.named = append(n.named, commandPaths(strings.Join(rest[1:], " "), home, "")...)
				}
			case `\copy`:
				for j, r := range rest {
					if strings.EqualFold(r, "program") {
						n.named = append(n.named, commandPaths(strings.Join(rest[j+1:], " "), home, "")...)
						break
					}
				}
			case `\i`, `\include`, `\ir`, `\include_relative`:
				if len(rest) == 0 {
					continue
				}
				f := strings.Trim(rest[0], `'"`)
				base := ""
				if w == `\ir` || w == `\include_relative` {
					base = dir
				}
				p := homePath(f, home)
				if p == "" {
					p = relPath(f, base)
				}
				if p != "" && p != home && p != "/" {
					n.includes = append(n.includes, p)
				}
			}
		}
	}
	return n
}
