package sandbox

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/internal/shnest"
	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/syntax"
)

// The shells' start-up files in the owner's home are protected, but they may name other files
// the user's next shell runs: a file they source (`. ~/proj/env.sh`, a dotfiles repository's
// aliases), a program they run by its path, the dirs they put first on PATH or zsh's fpath
// (`export PATH=~/proj/tools:$PATH`: a `ls` there runs instead of the system's), ZDOTDIR,
// where zsh reads the rest of its start-up files, and ENV and BASH_ENV, which other shells
// source. Such a path in a writable dir is as much the shell's start-up as .bashrc is, so it
// is protected like it. Only what the files say in words known before they run is seen: a
// name built at run time (`eval "$(pyenv init -)"`) is not.

// shellStartup are the start-up files bash, sh and zsh read from the home.
var shellStartup = []string{
	".profile", ".bash_profile", ".bash_login", ".bashrc", ".bash_aliases", ".bash_logout",
	".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout",
	// Sourced by sh as other programs start: mvn, sensible-editor.
	".mavenrc", ".selected_editor",
}

// zshStartup are the files zsh reads from ZDOTDIR when it is set.
var zshStartup = []string{".zshenv", ".zprofile", ".zshrc", ".zlogin", ".zlogout"}

const (
	// maxShellNamedFiles bounds the files read to find them, sourced ones included.
	maxShellNamedFiles = 64
	// maxShellFileBytes bounds each one: start-up files are small.
	maxShellFileBytes = 256 << 10
)

// shellNamedPaths returns what the shells' start-up files in home name as code they run,
// absolute and clean (see above); a sourced file is read as well. A relative name is the
// home's: a login shell starts there. missing, when set, answers for a path known not to be
// there without a look of its own (most of the files are some other shell's). Run as the
// caller, uid.
func shellNamedPaths(home string, uid uint32, missing func(string) bool) (named []string, moved []movedConfig, err error) {
	if home == "" || home == "/" {
		return nil, nil, nil
	}
	var starts []string
	for _, f := range shellStartup {
		starts = append(starts, filepath.Join(home, f))
	}
	named, err = followNamed(starts, maxShellNamedFiles, missing, func(p string, out *namedSet, read func(string)) bool {
		n, ok := shellFileNames(p, home, uid)
		if !ok {
			return false
		}
		for _, c := range n.moved {
			if !slices.Contains(moved, c) {
				moved = append(moved, c)
			}
		}
		// zsh sources FILE.zwc, compiled, in place of a FILE it is newer than.
		for _, p := range n.sourced {
			out.add(p)
			out.add(p + ".zwc")
			read(p)
		}
		for _, d := range n.zdotdirs {
			for _, f := range zshStartup {
				out.add(filepath.Join(d, f))
				out.add(filepath.Join(d, f) + ".zwc")
				read(filepath.Join(d, f))
			}
		}
		for _, p := range n.named {
			out.add(p)
		}
		return true
	})
	return named, moved, err
}

// followNamed reads the config files starts, and each one a file read names for reading
// (read), skipping those missing says are not there; visit adds what each names to out and
// reports whether the file was there to read. Past max files read, one more that is there
// fails the whole (errTooManyFiles): what it names could not be protected. The paths, or
// errTooManyNamed past maxNamedPaths.
func followNamed(starts []string, max int, missing func(string) bool, visit func(p string, out *namedSet, read func(string)) bool) ([]string, error) {
	var out namedSet
	var queue []string
	queued := map[string]bool{}
	read := func(p string) {
		if p != "" && !queued[p] {
			queued[p] = true
			queue = append(queue, p)
		}
	}
	for _, p := range starts {
		read(p)
	}
	reads := 0
	for i := 0; i < len(queue); i++ {
		if missing != nil && missing(queue[i]) {
			continue
		}
		if reads == max {
			if fi, err := os.Stat(queue[i]); err == nil && fi.Mode().IsRegular() {
				return nil, errTooManyFiles
			}
			continue
		}
		if visit(queue[i], &out, read) {
			reads++
		}
	}
	return out.list()
}

// errTooManyFiles is start-up files that source or include more files than are read.
var errTooManyFiles = fmt.Errorf("%w: the user's start-up files (shell, ssh, vim, tmux, fish) source or include more files than sandboxd reads on every call to protect what they name; merge some", ErrBadSpec)

// maxNamedPaths bounds the paths the start-up files, or the git configs, name: each is looked
// at on every call, and a .bashrc of 37 000 PATH entries took each call 8 s of the daemon's
// CPU. Past it nothing runs: the paths past the bound could not be protected.
const maxNamedPaths = 1024

// errTooManyNamed is a start-up file or git config naming more than maxNamedPaths paths.
var errTooManyNamed = fmt.Errorf("%w: the shells' start-up files or the git configs name more than %d paths as code they run (PATH entries, sourced files, hooks), which sandboxd protects on every call; shorten them", ErrBadSpec, maxNamedPaths)

// namedSet collects named paths in order, each once, up to maxNamedPaths.
type namedSet struct {
	paths []string
	seen  map[string]bool
	over  bool
}

func (n *namedSet) add(p string) {
	if p == "" || n.seen[p] {
		return
	}
	if len(n.paths) == maxNamedPaths {
		n.over = true
		return
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[p] = true
	n.paths = append(n.paths, p)
}

// list is the paths, or errTooManyNamed past the bound.
func (n *namedSet) list() ([]string, error) {
	if n.over {
		return nil, errTooManyNamed
	}
	return n.paths, nil
}

// shellFileNames is shellNames of the file at p, parsed once for each version of it
// (parsedFiles): parsing a distribution's .bashrc costs a few hundred µs where a stat costs one
// or two.
func shellFileNames(p, home string, uid uint32) (startupNames, bool) {
	return shellNamesCache.get(p, home, uid, maxShellFileBytes, func(b []byte) startupNames { return shellNames(b, home) })
}

var shellNamesCache = newParsedFiles(func(n startupNames) int {
	return stringsSize(n.sourced) + stringsSize(n.zdotdirs) + stringsSize(n.named)
})

// parsedFiles keeps what a parse made of each version of a file the plan reads on every call
// (a start-up file, an agent's settings). A version is the file's identity, size and times (a
// ctime its owner cannot set back); an answer is given only to the uid that read it, in the
// context (a home) it was read for.
type parsedFiles[T any] struct {
	mu    sync.Mutex
	m     map[fileVersion]T
	size  func(T) int // the bytes an answer holds, string headers included
	bytes int         // of the answers m holds
}

// fileVersion is one version of one file, as read by one uid for one context.
type fileVersion struct {
	path, context      string
	uid                uint32
	dev, ino           uint64
	size, mtime, ctime int64
}

// maxParsedFiles bounds each cache: a few files for each user of the host; maxParsedBytes
// what its answers hold together. The files are users': a 4 MB ~/.claude.json of empty
// arguments parses to 22 MB, and a touch between calls made each version another entry.
const (
	maxParsedFiles = 1024
	maxParsedBytes = 16 << 20
)

func newParsedFiles[T any](size func(T) int) *parsedFiles[T] {
	return &parsedFiles[T]{m: map[fileVersion]T{}, size: size}
}

// stringsSize is what the strings ss hold, each with its header.
func stringsSize(ss []string) int {
	n := 0
	for _, s := range ss {
		n += len(s) + 16
	}
	return n
}

// get is parse of the regular file at p (at most limit bytes), read as the caller uid; false
// when it is not one or is larger.
func (c *parsedFiles[T]) get(p, context string, uid uint32, limit int64, parse func([]byte) T) (T, bool) {
	var zero T
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > limit {
		return zero, false
	}
	key := fileVersion{path: p, context: context, uid: uid, dev: st.Dev, ino: st.Ino, size: st.Size,
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v, true
	}
	b, ok := readRegular(p, limit)
	if !ok {
		return zero, false
	}
	v = parse(b)
	if time.Now().UnixNano()-key.ctime < int64(stampSlack) {
		// Changed within the ctime's tick of now, it could change again without the ctime
		// moving: used, not kept.
		return v, true
	}
	n := c.size(v)
	if n > maxParsedBytes/4 {
		return v, true // used, not kept: one file would hold a quarter of the cache
	}
	c.mu.Lock()
	if len(c.m) >= maxParsedFiles || c.bytes+n > maxParsedBytes {
		clear(c.m)
		c.bytes = 0
	}
	if _, had := c.m[key]; !had {
		c.bytes += n
	}
	c.m[key] = v
	c.mu.Unlock()
	return v, true
}

// startupNames is what one start-up file names: files it sources (or names as ENV or
// BASH_ENV), ZDOTDIR values, and programs and PATH or fpath dirs.
type startupNames struct {
	sourced, zdotdirs, named []string
	// moved are configs the file moves (GIT_CONFIG_GLOBAL, XDG_CONFIG_HOME's git/config,
	// KUBECONFIG): their tools read them as they read the home's, so what they name is read too.
	moved []movedConfig
}

// moveGit adds git configs to moved.
func (n *startupNames) moveGit(paths ...string) {
	for _, p := range paths {
		n.moved = append(n.moved, movedConfig{gitKind, p})
	}
}

// shellNames parses one start-up file (as bash, or as zsh where bash cannot parse it) and
// returns what it names, absolute and clean; what neither can parse is read word by word
// (shellPieces).
func shellNames(src []byte, home string) startupNames {
	var n startupNames
	n.parse(src, home, 0)
	// The home or a dir above it would keep every session in the home read-only.
	keep := func(p string) bool { return aboveOrHome(p, home) }
	n.named = slices.DeleteFunc(n.named, keep)
	n.sourced = slices.DeleteFunc(n.sourced, keep)
	return n
}

// maxNestedText bounds how deep shell text inside a start-up file's strings (an alias's value,
// a trap's or PROMPT_COMMAND's command, eval's words) is read as shell in turn.
const maxNestedText = 3

// parse adds what src names to n; depth counts the strings it was found in.
func (n *startupNames) parse(src []byte, home string, depth int) {
	pieces := shellPieces(src)
	// A function the file defines may put its argument on PATH or source it
	// (`pathadd() { PATH="$1:$PATH"; }; pathadd ~/p/bin`): a path given to one is named.
	funcs := map[string]bool{}
	for _, p := range pieces {
		if p.stmt != nil {
			syntax.Walk(p.stmt, func(node syntax.Node) bool {
				if fd, ok := node.(*syntax.FuncDecl); ok && fd.Name != nil {
					funcs[fd.Name.Value] = true
				}
				return true
			})
		}
	}
	base := home      // where a relative name is taken from: the home, or the last cd to a path
	var dirs []string // pushd's stack, for popd
	abs := func(p string) string {
		switch {
		case p == "":
			return ""
		case filepath.IsAbs(p):
			return filepath.Clean(p)
		}
		return filepath.Join(base, p)
	}
	text := func(t string) {
		// Shell text the shell runs later (an alias's value, a trap's command): what it
		// names is named here.
		if depth < maxNestedText && !strings.Contains(t, dynamicPart) {
			n.parse([]byte(t), home, depth+1)
		}
	}
	file := func(v string) {
		if !strings.Contains(v, dynamicPart) && (filepath.IsAbs(v) || strings.HasPrefix(v, home+"/")) {
			if strings.ContainsAny(v, "*?[") {
				v = globDir(v) // what the glob matches, now or once a call made it: the dir whole
			}
			n.named = append(n.named, filepath.Clean(v))
		}
	}
	pathsIn := func(v string) {
		n.named = append(n.named, pathWords(v, home)...)
	}
	// gitDir is a git dir a command or GIT_DIR names: what git runs or reads as config there,
	// protected as a repository's .git's are, and its config read as git's.
	gitDir := func(d string) {
		if d == "" || strings.Contains(d, dynamicPart) {
			return
		}
		d = abs(d) // relative: to the last cd, or the home a login starts in
		for _, rel := range ProtectedInDir {
			if r, ok := strings.CutPrefix(rel, ".git/"); ok {
				file(filepath.Join(d, r))
			}
		}
		n.moveGit(filepath.Join(d, "config"))
	}
	// A file-level view of GIT_CONFIG_KEY_n: where one is an include, the values are configs.
	var gitKeys, gitValues []string
	defer func() {
		if slices.ContainsFunc(gitKeys, isGitInclude) {
			for _, v := range gitValues {
				n.moveGit(pathWords(v, home)...)
			}
		}
	}()
	assign := func(a *syntax.Assign) {
		if a == nil || a.Name == nil {
			return
		}
		var vals []string
		if a.Value != nil {
			if s, ok := wordText(a.Value, home); ok {
				vals = append(vals, s)
			}
		}
		if a.Array != nil {
			for _, e := range a.Array.Elems {
				if e.Value != nil {
					if s, ok := wordText(e.Value, home); ok {
						vals = append(vals, s)
					}
				}
			}
		}
		for _, v := range vals {
			switch a.Name.Value {
			case "PATH", "FPATH", "path", "fpath":
				// zsh's glob qualifier (`~/p/bin(N-/)`: only if it is a dir) is no part of the dir.
				if e, ok := strings.CutSuffix(v, ")"); ok && !strings.Contains(e, ":") {
					if i := strings.LastIndexByte(e, '('); i > 0 {
						v = e[:i]
					}
				}
				// A relative entry (./bin, ./node_modules/.bin) is found from whatever dir the
				// shell is in: every project's bin/ is one, which no mount can keep read-only
				// without stopping builds and checkouts there.
				for _, e := range pathEntries(v, home) {
					if filepath.IsAbs(e) {
						n.named = append(n.named, filepath.Clean(e))
					}
				}
			case "ZDOTDIR":
				if !strings.Contains(v, dynamicPart) {
					n.zdotdirs = append(n.zdotdirs, abs(v))
				}
			case "ENV", "BASH_ENV":
				if !strings.Contains(v, dynamicPart) {
					n.sourced = append(n.sourced, abs(v))
				}
			case "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS4":
				text(v) // run (PS* through $(…)) at each prompt
			case "PYTHONSTARTUP", "LD_PRELOAD", "LD_AUDIT", "NODE_OPTIONS", "PERL5OPT", "RUBYOPT",
				"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "MAVEN_OPTS", "GRADLE_OPTS":
				// Code the next interpreter (or every program, LD_PRELOAD) loads, named in its
				// options however they are glued: -javaagent:/p/x.jar, --require /p/pre.js, -r/p/x.
				pathsIn(v)
			case "GIT_TEMPLATE_DIR":
				// Its hooks are copied into every repository git init or clone makes, and run
				// there (post-checkout at once): the dir whole.
				pathsIn(v)
			case "GIT_CONFIG_PARAMETERS":
				// Config git takes before its files ('core.editor'='/p/x' pairs): every path-like
				// word of it, and an included file is read as config.
				pathsIn(v)
				for _, kv := range gitParamPairs(v) {
					if k, val, ok := strings.Cut(kv, "="); ok && isGitInclude(k) {
						n.moveGit(pathWords(val, home)...)
					}
				}
			case "GIT_DIR", "GIT_COMMON_DIR":
				gitDir(v)
			case "LD_LIBRARY_PATH", "GIT_EXEC_PATH", "PYTHONUSERBASE", "JAVA_HOME", "GOROOT":
				// Dirs every program's libraries, git's subcommands, Python's user site or a
				// toolchain (mvn runs $JAVA_HOME/bin/java) come from, as PATH's commands do:
				// protected whole.
				for _, e := range pathEntries(v, home) {
					file(e)
				}
			case "PYTHONPATH":
				// A dir on it is the project's own source, written as the agent works; what
				// every python imports unasked from it is its sitecustomize and usercustomize.
				for _, e := range pathEntries(v, home) {
					if filepath.IsAbs(e) {
						file(filepath.Join(e, "sitecustomize.py"))
						file(filepath.Join(e, "usercustomize.py"))
					}
				}
			case "EDITOR", "VISUAL", "PAGER", "MANPAGER", "GIT_EDITOR", "GIT_PAGER", "GIT_SSH", "GIT_SSH_COMMAND",
				"SSH_ASKPASS", "SUDO_ASKPASS", "BROWSER", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_SEQUENCE_EDITOR",
				"GIT_PROXY_COMMAND", "LESSOPEN", "LESSCLOSE", "SELECTED_EDITOR":
				// A command the user's tools run: less's through the shell after a | (|| where
				// empty output means none, - for standard input too). Its path-like words as
				// well, where the text is past the depth read or its options name a file
				// (vim -u ~/p/vimrc).
				text(strings.TrimLeft(v, "|-"))
				pathsIn(v)
			case "VIMINIT":
				vn := vimScriptNames([]byte(v), home) // vim's start-up commands in place of a vimrc
				for _, p := range append(vn.sourced, vn.dirs...) {
					file(p)
				}
			case "XDG_CONFIG_HOME":
				// The user's .config moved: what the home's .config holds that is protected,
				// there.
				if d := abs(v); filepath.IsAbs(v) || strings.HasPrefix(v, home+"/") {
					for _, rel := range ProtectedInHome {
						if r, ok := strings.CutPrefix(rel, ".config/"); ok {
							file(filepath.Join(d, r))
						}
					}
					if !strings.Contains(v, dynamicPart) {
						n.moveGit(filepath.Join(d, "git/config"))
					}
				}
				n.moved = append(n.moved, movedTo(a.Name.Value, v, home)...) // the go command's env
			default:
				if k, ok := strings.CutPrefix(a.Name.Value, "GIT_CONFIG_KEY_"); ok && k != "" {
					gitKeys = append(gitKeys, v)
				} else if k, ok := strings.CutPrefix(a.Name.Value, "GIT_CONFIG_VALUE_"); ok && k != "" {
					// GIT_CONFIG_COUNT's config: any value may be a command or a hooks path.
					gitValues = append(gitValues, v)
					pathsIn(v)
				}
				if configVars[a.Name.Value] {
					// A tool's config file (or dir) moved from its place in the home, where
					// it is protected: ripgrep's, git's, kubectl's, gpg's, cargo's.
					for _, e := range pathEntries(v, home) {
						file(e)
						if a.Name.Value == "GIT_CONFIG_GLOBAL" || a.Name.Value == "GIT_CONFIG_SYSTEM" {
							if !strings.Contains(e, dynamicPart) && (filepath.IsAbs(e) || strings.HasPrefix(e, home+"/")) {
								n.moveGit(filepath.Clean(e))
							}
						}
					}
					n.moved = append(n.moved, movedTo(a.Name.Value, v, home)...)
				}
			}
		}
	}
	visit := func(node syntax.Node) bool {
		switch x := node.(type) {
		case *syntax.ParamExp:
			// `: ${KUBECONFIG:=$HOME/p/kc}` assigns as it expands.
			if x.Exp != nil && (x.Exp.Op == syntax.AssignUnset || x.Exp.Op == syntax.AssignUnsetOrNull) && defaultWord(x) != nil {
				assign(&syntax.Assign{Name: x.Param, Value: x.Exp.Word})
			}
		case *syntax.CallExpr:
			for _, a := range x.Assigns {
				assign(a)
			}
			words := make([]string, 0, len(x.Args))
			for _, w := range x.Args {
				t, _ := wordText(w, home)
				words = append(words, t)
			}
			// What runs the next word as a command: builtin source, command ., env X=1 prog,
			// exec -a NAME prog, timeout 5 prog.
			for len(words) > 0 && commandWrappers[words[0]] {
				wrapper := words[0]
				words = words[1:]
				for len(words) > 0 && (strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "/") ||
					wrapper == "timeout" && duration.MatchString(words[0])) {
					if (wrapper == "exec" && words[0] == "-a" || wrapper == "nice" && words[0] == "-n") && len(words) > 1 {
						words = words[1:] // the option's value
					}
					words = words[1:] // options (command -p), assignments (env A=1), timeout's duration
				}
			}
			if len(words) == 0 || words[0] == "" || strings.Contains(words[0], dynamicPart) {
				break
			}
			first, args := words[0], words[1:]
			if first == "source" || first == "." || first == "trap" {
				for len(args) > 0 && args[0] == "--" {
					args = args[1:]
				}
			}
			switch {
			case (first == "source" || first == ".") && len(args) > 0:
				p := args[0]
				if e, ok := strings.CutSuffix(p, ")"); ok {
					if i := strings.LastIndexByte(e, '('); i > 0 {
						p = e[:i] // zsh's qualifier: (N), no error when missing
					}
				}
				switch {
				case strings.Contains(p, dynamicPart):
				case strings.ContainsAny(p, "*?["):
					// `source ~/p/rc/*.sh`: a file a call adds that the glob matches is sourced
					// too (zsh's all of them, bash's first): the dir whole.
					if d := globDir(abs(p)); !aboveOrHome(d, home) {
						n.named = append(n.named, d)
					}
				default:
					n.sourced = append(n.sourced, abs(p))
				}
			case (first == "cd" || first == "pushd") && len(args) > 0:
				// `cd ~/proj && . ./env.sh`, `pushd ~/proj; . ./env.sh; popd`.
				if first == "pushd" && (args[0] == "-q" || args[0] == "--") {
					args = args[1:]
				}
				if len(args) == 1 && filepath.IsAbs(args[0]) && !strings.Contains(args[0], dynamicPart) {
					if first == "pushd" {
						dirs = append(dirs, base)
					}
					base = filepath.Clean(args[0])
				}
			case first == "popd" && !slices.ContainsFunc(args, func(a string) bool { return a == "-n" || strings.HasPrefix(a, "+") }):
				if len(dirs) > 0 {
					base, dirs = dirs[len(dirs)-1], dirs[:len(dirs)-1]
				}
			case filepath.Base(first) == "git":
				// git -c core.fsmonitor=~/p/x (an alias's, a function's): config git takes
				// before its files, which may name a program or a hooks path.
				gitBase := base
				for i, a := range args {
					// --git-dir: a repository kept apart, as dotfiles are (`alias
					// config='git --git-dir=$HOME/.cfg --work-tree=$HOME'`), relative to a
					// -C before it.
					if a == "-C" && i+1 < len(args) && !strings.Contains(args[i+1], dynamicPart) {
						gitBase = filepath.Join(gitBase, args[i+1])
						if filepath.IsAbs(args[i+1]) {
							gitBase = filepath.Clean(args[i+1])
						}
					}
					d, ok := strings.CutPrefix(a, "--git-dir=")
					if !ok && a == "--git-dir" && i+1 < len(args) {
						d, ok = args[i+1], true
					}
					if ok && !filepath.IsAbs(d) && d != "" {
						d = filepath.Join(gitBase, d)
					}
					if ok {
						gitDir(d)
					}
					if a != "-c" || i+1 == len(args) {
						continue
					}
					if k, v, ok := strings.Cut(args[i+1], "="); ok && !strings.Contains(v, dynamicPart) {
						pathsIn(v)
						if isGitInclude(k) {
							n.moveGit(pathWords(v, home)...)
						}
					}
				}
				if filepath.IsAbs(first) {
					n.named = append(n.named, filepath.Clean(first))
				}
			case first == "eval":
				text(strings.Join(args, " "))
				n.scan(strings.Join(args, " "), home, base) // what it names in words the parse may not see
			case first == "alias":
				for _, a := range args {
					if _, v, ok := strings.Cut(a, "="); ok {
						text(v)
					}
				}
			case first == "trap" && len(args) > 0:
				text(args[0])
			case first == "bind":
				for i, a := range args {
					if a == "-x" && i+1 < len(args) {
						if _, cmd, ok := strings.Cut(args[i+1], ":"); ok {
							text(cmd) // bind -x '"\C-t": cmd'
						}
					}
				}
			case first == "hash" || first == "complete" || first == "enable":
				// hash -p FILE, complete -C FILE, enable -f FILE: a program or a library.
				for i, a := range args {
					if (a == "-p" || a == "-C" || a == "-f") && i+1 < len(args) {
						file(args[i+1])
					}
				}
			case first == "autoload" || interpreters[filepath.Base(first)]:
				// autoload -Uz ~/fns/x; bash ~/proj/setup.sh; python3 ~/proj/x.py: the script.
				shell := shells[filepath.Base(first)]
				for i, a := range args {
					// -c, and for a shell a cluster holding c (bash -lc '…'): the next word is a script.
					runs := a == "-c" || shell && len(a) > 1 && a[0] == '-' && a[1] != '-' && strings.ContainsRune(a, 'c')
					if runs && i+1 < len(args) && first != "autoload" {
						text(args[i+1])
						break
					}
					if !strings.HasPrefix(a, "-") {
						file(a)
						if first != "autoload" {
							break
						}
					}
				}
				if filepath.IsAbs(first) {
					n.named = append(n.named, filepath.Clean(first))
				}
			case filepath.IsAbs(first):
				n.named = append(n.named, filepath.Clean(first))
			case funcs[first]:
				for _, a := range args {
					for _, e := range pathEntries(a, home) {
						file(e)
					}
				}
			}
		case *syntax.DeclClause:
			for _, a := range x.Args {
				assign(a)
			}
		case *syntax.ForClause:
			// for f in ~/dotfiles/bash/*.sh; do . "$f"; done: what the glob matches, now or
			// once a call made it, the loop may run; the dir it lists is protected whole.
			if it, ok := x.Loop.(*syntax.WordIter); ok {
				sources := sourcesVar(x.Do, it.Name.Value)
				for _, w := range it.Items {
					if t, ok := wordText(w, home); ok && !strings.Contains(t, dynamicPart) && strings.ContainsAny(t, "*?[") {
						if d := globDir(abs(t)); d != "/" && d != home {
							n.named = append(n.named, d)
						}
						if sources {
							// And each file it sources now is read for what it names, as
							// a file sourced by name is.
							matches, _ := filepath.Glob(abs(t))
							for _, m := range matches {
								if fi, err := os.Stat(m); err == nil && fi.Mode().IsRegular() {
									n.sourced = append(n.sourced, filepath.Clean(m))
								}
							}
						}
					}
				}
			}
		case *syntax.CmdSubst, *syntax.ProcSubst:
			// What `$(…)` or `<(…)` reads may be run (`source <(cat ~/p/x)`, `eval "$(cat
			// ~/p/x)"`) or printed into a name (`PATH=$(echo ~/p/bin):$PATH`): each path in
			// it is named. A substitution inside is left to its own visit.
			syntax.Walk(x, func(m syntax.Node) bool {
				switch y := m.(type) {
				case *syntax.CmdSubst, *syntax.ProcSubst:
					return m == x
				case *syntax.Word:
					if t, ok := wordText(y, home); ok {
						for _, e := range pathEntries(t, home) {
							file(e) // a glob's dir whole: `done < <(ls ~/p/rc/*.sh)` sources each
						}
					}
				}
				return true
			})
		}
		return true
	}
	for _, p := range pieces {
		if p.stmt != nil {
			syntax.Walk(p.stmt, visit)
		} else {
			n.scan(p.text, home, base)
		}
	}
}

// shellPiece is a top-level statement of a start-up file, or text of it that neither parser
// could read.
type shellPiece struct {
	stmt *syntax.Stmt
	text string
}

// maxShellPieces bounds the parses of a file that does not parse whole.
const maxShellPieces = 32

// shellPieces is src's statements, parsed as bash or else zsh. Where neither can parse it
// whole (zsh's short forms: `for f (a b) source $f`, `if [[ … ]] { … }`), what it names
// must not go unseen: the statements before the one that fails are kept, that statement's
// first line is text to read word by word, and the parse resumes on the next line (so the
// body of a block whose head failed is still parsed). Past maxShellPieces tries, and for a
// file nesting too deep for the parser's stack, the rest is text.
func shellPieces(src []byte) []shellPiece {
	if shnest.TooDeep(src) {
		return []shellPiece{{text: string(src)}} // 256 KiB of `(` would take the parser's stack past the runtime's 1 GiB
	}
	var out []shellPiece
	for try := 0; len(src) > 0; try++ {
		if try == maxShellPieces {
			return append(out, shellPiece{text: string(src)})
		}
		var best []*syntax.Stmt
		var bestErr error
		bestEnd := -1
		for _, lang := range []syntax.LangVariant{syntax.LangBash, syntax.LangZsh} {
			var stmts []*syntax.Stmt
			var err error
			for st, e := range syntax.NewParser(syntax.Variant(lang)).StmtsSeq(bytes.NewReader(src)) {
				// Not a break at the error: the parser may yield again, which panics.
				if err == nil && e != nil {
					err = e
				} else if err == nil {
					stmts = append(stmts, st)
				}
			}
			if err == nil {
				best, bestErr = stmts, nil
				break
			}
			// The variant that read further before failing.
			end := 0
			if len(stmts) > 0 {
				end = int(stmts[len(stmts)-1].End().Offset())
			}
			if end > bestEnd {
				best, bestErr, bestEnd = stmts, err, end
			}
		}
		for _, st := range best {
			out = append(out, shellPiece{stmt: st})
		}
		if bestErr == nil {
			break
		}
		start := skipSeparators(src, max(bestEnd, 0))
		eol := bytes.IndexByte(src[start:], '\n')
		if eol < 0 {
			return append(out, shellPiece{text: string(src[start:])})
		}
		out = append(out, shellPiece{text: string(src[start : start+eol])})
		src = src[start+eol+1:]
	}
	return out
}

// skipSeparators is the offset of the first word at or after i in src, past blanks,
// separators and comments.
func skipSeparators(src []byte, i int) int {
	for i < len(src) {
		switch src[i] {
		case ' ', '\t', '\r', '\n', ';', '&', '|':
			i++
		case '#':
			eol := bytes.IndexByte(src[i:], '\n')
			if eol < 0 {
				return len(src)
			}
			i += eol
		default:
			return i
		}
	}
	return i
}

// scan adds what shell text no parser could read names, read word by word, conservatively:
// each word that looks like a path (holds a /, or starts with ~ or $HOME; a relative one is
// base's) is named, a file or dir alike, up to what is known only when the shell runs (a
// glob's or a variable's part: the dir before it); a word after source or . is sourced, and
// ZDOTDIR=, ENV= and BASH_ENV= values are read as such. Neither the home nor / is named:
// that would keep every session in the home read-only.
func (n *startupNames) scan(text, home, base string) {
	add := func(p string) {
		p = filepath.Clean(p)
		if filepath.IsAbs(p) && !strings.HasPrefix(home+"/", strings.TrimSuffix(p, "/")+"/") {
			n.named = append(n.named, p)
		}
	}
	// path is w with ~ and $HOME expanded and made absolute, or "" where it does not look
	// like a path.
	path := func(w string) string {
		w = strings.TrimLeft(w, "-+?!") // ${X:-~/p}, --opt=~/p
		for _, h := range []string{"~", "$HOME", "${HOME}"} {
			if w == h || strings.HasPrefix(w, h+"/") {
				w = home + w[len(h):]
				break
			}
		}
		w = strings.TrimRight(w, "}") // { source ~/p/x}
		if !strings.Contains(w, "/") || strings.IndexAny(w, "$*?[{`\x00") == 0 {
			return "" // $ZSH/lib is no dir of base's
		}
		if !filepath.IsAbs(w) {
			w = base + "/" + w
		}
		return w
	}
	fields := strings.FieldsFunc(text, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\r' || r == '\n' || strings.ContainsRune(";|&()<>`\"'", r)
	})
	for i, f := range fields {
		// A file sourced, a ZDOTDIR, an ENV or a BASH_ENV: read for what it names in turn.
		k, v, assign := strings.Cut(f, "=")
		var into *[]string
		switch {
		case i > 0 && isSource(fields[i-1]), i > 1 && fields[i-1] == "--" && isSource(fields[i-2]):
			into, v = &n.sourced, f
		case assign && (k == "ENV" || k == "BASH_ENV"):
			into = &n.sourced
		case assign && k == "ZDOTDIR":
			into = &n.zdotdirs
		}
		if into != nil && v != "" && v != "--" {
			p := path(v)
			if p == "" {
				p = base + "/" + v // source .fzf.zsh
			}
			if !strings.ContainsAny(p, "$`\x00") {
				*into = append(*into, filepath.Clean(p))
			}
		}
		for _, part := range strings.FieldsFunc(f, func(r rune) bool { return r == '=' || r == ':' }) {
			p := path(part)
			if p == "" || strings.Contains(f, "://") {
				continue
			}
			// What the shell fills in only when it runs (a variable, a glob, a brace list):
			// what comes before it, and the dir that holds it.
			if j := strings.IndexAny(p, "$*?[{\x00"); j >= 0 {
				p = p[:j]
				if !strings.HasSuffix(p, "/") {
					add(filepath.Dir(p))
				}
			}
			add(p)
		}
	}
}

// isSource is a word that sources the next.
func isSource(w string) bool {
	return w == "source" || w == "." || w == `\source` || w == `\.`
}

// sourcesVar reports whether stmts source the loop variable name (`. "$f"`, `source $f`).
func sourcesVar(stmts []*syntax.Stmt, name string) bool {
	found := false
	for _, st := range stmts {
		syntax.Walk(st, func(n syntax.Node) bool {
			c, ok := n.(*syntax.CallExpr)
			if !ok || len(c.Args) < 2 || found {
				return !found
			}
			if cmd := c.Args[0].Lit(); cmd == "." || cmd == "source" {
				for _, p := range c.Args[1].Parts {
					if dq, ok := p.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
						p = dq.Parts[0]
					}
					if pe, ok := p.(*syntax.ParamExp); ok && pe.Param != nil && pe.Param.Value == name {
						found = true
					}
				}
			}
			return !found
		})
	}
	return found
}

// configVars name a tool's config file or dir (each value a colon list), which the tool reads
// in place of the one in the home.
var configVars = map[string]bool{
	"RIPGREP_CONFIG_PATH": true, "GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_SYSTEM": true, "STARSHIP_CONFIG": true,
	"INPUTRC": true, "NPM_CONFIG_USERCONFIG": true, "npm_config_userconfig": true, "PIP_CONFIG_FILE": true,
	"MYVIMRC": true, "WGETRC": true, "PSQLRC": true, "LESSKEY": true, "KUBECONFIG": true, "AWS_CONFIG_FILE": true,
	"TF_CLI_CONFIG_FILE": true, "GOENV": true, "GNUPGHOME": true, "DOCKER_CONFIG": true, "CARGO_HOME": true,
	"IPYTHONDIR": true, "JUPYTER_CONFIG_DIR": true, "CURL_HOME": true,
}

// commandWrappers run the command their words after them name.
var commandWrappers = map[string]bool{"builtin": true, "command": true, "exec": true, "env": true, "nohup": true, "time": true, "nice": true, "noglob": true, "timeout": true}

// interpreters run the script their first operand names; shells are those that take option
// clusters (-lc).
var (
	shells       = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true}
	interpreters = map[string]bool{"bash": true, "sh": true, "zsh": true, "dash": true, "ksh": true, "fish": true,
		"python": true, "python3": true, "perl": true, "ruby": true, "node": true, "lua": true, "luajit": true,
		"php": true, "Rscript": true, "tclsh": true, "julia": true, "pwsh": true}
)

// duration is timeout's first operand.
var duration = regexp.MustCompile(`^[0-9.]+[smhd]?$`)

// pathEntries are the entries of a PATH value whose text is known: where part of an entry is
// known only when the shell runs (the marker), what comes before it and what comes after it
// are each an entry as well, since that part may hold a colon
// (`$HOME/tools${PATH:+:${PATH}}` puts $HOME/tools first). An empty entry, the shell's cwd,
// comes back as "". An entry's leading ~ is the home: bash expands a tilde after each colon of
// an assignment's value (`KUBECONFIG=/etc/kc:~/p/kc`).
func pathEntries(v, home string) []string {
	var out []string
	for _, e := range strings.Split(v, ":") {
		if e == "~" || strings.HasPrefix(e, "~/") {
			e = home + e[1:]
		}
		i, j := strings.Index(e, dynamicPart), strings.LastIndex(e, dynamicPart)
		if i < 0 {
			out = append(out, e)
			continue
		}
		for _, part := range []string{e[:i], e[j+len(dynamicPart):]} {
			if part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// dynamicPart stands for a part of a word known only when the shell runs.
const dynamicPart = "\x00"

// wordText is w as the shell would expand it where that is known before it runs: literal
// and quoted text, $HOME, and a leading ~/; anything else becomes dynamicPart. false for a
// word with no known text at all.
func wordText(w *syntax.Word, home string) (string, bool) {
	var b strings.Builder
	var part func(p syntax.WordPart, top bool)
	part = func(p syntax.WordPart, top bool) {
		switch x := p.(type) {
		case *syntax.Lit:
			v := x.Value
			if top && strings.IndexByte(v, '\\') >= 0 {
				v = unescape(v) // \. and \source are . and source
			} else if !top && strings.IndexByte(v, '\\') >= 0 {
				// In double quotes a backslash escapes $ ` " \ only: an alias's "… \$HOME/p/x"
				// is $HOME/p/x when it runs.
				v = dqUnescape.Replace(v)
			}
			if top && b.Len() == 0 {
				// ~/x, and ~NAME/x for the owner's own name (their home's last part).
				if user := "~" + filepath.Base(home); v == "~" || strings.HasPrefix(v, "~/") {
					v = home + v[1:]
				} else if v == user || strings.HasPrefix(v, user+"/") {
					v = home + v[len(user):]
				}
			}
			b.WriteString(v)
		case *syntax.SglQuoted:
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				part(q, false)
			}
		case *syntax.ParamExp:
			plain := x.Param != nil && x.Exp == nil && x.Repl == nil && x.Slice == nil && x.Index == nil && !x.Length && !x.Width && !x.Excl && x.Names == 0
			switch {
			case plain && x.Param.Value == "HOME":
				b.WriteString(home)
			case plain && (x.Param.Value == "USER" || x.Param.Value == "LOGNAME"):
				b.WriteString(filepath.Base(home)) // the owner's name, as the home's last part most often is
			case defaultWord(x) != nil:
				// ${MYBIN:-$HOME/p/tools}, ${X:=w}, ${X:+w}: the word is what the value is
				// whenever the variable is unset (or set, for +), as in a fresh login; the
				// variable's own value is unknown here, and so names nothing.
				if t, ok := wordText(defaultWord(x), home); ok {
					b.WriteString(t)
				} else {
					b.WriteString(dynamicPart)
				}
			default:
				b.WriteString(dynamicPart)
			}
		default:
			b.WriteString(dynamicPart)
		}
	}
	for _, p := range w.Parts {
		part(p, true)
	}
	s := b.String()
	return s, s != "" && s != dynamicPart
}

// defaultWord is the word of a parameter expansion that stands for the value when the variable
// is unset, empty or (for ${X:+w}) set: ${X:-w}, ${X-w}, ${X:=w}, ${X=w}, ${X:+w}, ${X+w}; nil
// for any other expansion.
func defaultWord(x *syntax.ParamExp) *syntax.Word {
	if x.Param == nil || x.Exp == nil || x.Exp.Word == nil || x.Repl != nil || x.Slice != nil || x.Index != nil ||
		x.Length || x.Width || x.Excl || x.Names != 0 {
		return nil
	}
	switch x.Exp.Op {
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull,
		syntax.AlternateUnset, syntax.AlternateUnsetOrNull:
		return x.Exp.Word
	}
	return nil
}

// ToolNamedPaths is what ~/.ssh/config, the vim start-up files, the other tools' (rcFiles) and
// the configs that name programs (toolConfigs: npm, kubectl, cargo, aws, gpg-agent, psql) name
// as config the tool reads or code it runs (sshNamedPaths, vimNamedPaths, rcNamedPaths,
// toolConfigNamedPaths), read as the caller: for the daemon's own check before a file tool
// writes.
func ToolNamedPaths(uid, gid uint32, groups []uint32, home string) ([]string, error) {
	var out []string
	var named error
	err := asCaller(uid, gid, groups, func() {
		for _, f := range []func(string, uint32, func(string) bool) ([]string, error){sshNamedPaths, vimNamedPaths, rcNamedPaths, toolConfigNamedPaths} {
			more, err := f(home, uid, nil)
			out, named = append(out, more...), cmp.Or(named, err)
		}
	})
	return out, cmp.Or(err, named)
}

// ShellNamedPaths is what the shells' start-up files in home name as code they run
// (shellNamedPaths), and what the git configs they move name (gitNamedPaths), read as the
// caller: for the daemon's own check before a file tool writes.
func ShellNamedPaths(uid, gid uint32, groups []uint32, home string) ([]string, error) {
	var out []string
	var named error
	err := asCaller(uid, gid, groups, func() {
		var moved []movedConfig
		var more []string
		if out, moved, named = shellNamedPaths(home, uid, nil); named == nil && len(moved) > 0 {
			more, named = movedNamedPaths(moved, home, uid)
			out = append(out, more...)
		}
	})
	return out, cmp.Or(err, named)
}

// dqUnescape undoes the escapes double quotes know.
var dqUnescape = strings.NewReplacer(`\$`, `$`, "\\`", "`", `\"`, `"`, `\\`, `\`, "\\\n", "")

// aboveOrHome is p the home, / or a dir above the home: never named, since it would keep
// every session in the home read-only.
func aboveOrHome(p, home string) bool {
	return strings.HasPrefix(home+"/", strings.TrimSuffix(p, "/")+"/")
}

// pathWords are the path-like words of s (a command line, a JVM's or an interpreter's
// options, git config values), absolute and clean: each word, split at = : and , too, that is
// absolute or starts with ~/, $HOME/ or ${HOME}/, a short option's glued value (-r/p/x,
// -I~/lib) and an @argfile; for a glob, the dir that holds it. A word with a part known only at
// run time is left out, and so are the home, / and the dirs above the home.
func pathWords(s, home string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool {
		return r == ' ' || r == '\t' || r == '\n' || r == '\r' || strings.ContainsRune(";|&()<>`\"'=:,", r)
	}) {
		if strings.Contains(f, dynamicPart) {
			continue
		}
		p := homePath(strings.TrimPrefix(f, "@"), home)
		if p == "" && len(f) > 2 && f[0] == '-' && f[1] != '-' {
			p = homePath(f[2:], home)
		}
		if strings.ContainsAny(p, "*?[") {
			p = globDir(p)
		}
		if p != "" && !aboveOrHome(p, home) {
			out = append(out, p)
		}
	}
	return out
}

// isGitInclude is a git config key whose value is another config file git reads.
func isGitInclude(k string) bool {
	k = strings.ToLower(k)
	return k == "include.path" || strings.HasPrefix(k, "includeif.") && strings.HasSuffix(k, ".path")
}

// gitParamPairs are GIT_CONFIG_PARAMETERS's key=value entries, as git quotes them
// ('core.editor'='vim', or older 'core.editor=vim'): shell words in single quotes.
func gitParamPairs(v string) []string {
	var out []string
	var b strings.Builder
	in, has := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\'':
			in, has = !in, true
		case c == '\\' && !in && i+1 < len(v):
			i++
			b.WriteByte(v[i])
			has = true
		case !in && (c == ' ' || c == '\t' || c == '\n'):
			if has {
				out = append(out, b.String())
			}
			b.Reset()
			has = false
		default:
			b.WriteByte(c)
			has = true
		}
	}
	if has {
		out = append(out, b.String())
	}
	return out
}
