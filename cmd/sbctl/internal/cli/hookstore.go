package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// hookStore keeps, per agent session (and cwd, and daemon), the id of the sandboxd session
// the hook decides in, and the command files of confined Bash calls. Its directory is the
// user's own (0700), under $XDG_RUNTIME_DIR when there is one: that directory is hidden from
// every confined child, so no command sandboxd runs can plant a session id or swap a command.
// The fallback, ~/.cache/sandboxd/hook, is a protected path (sandbox.ProtectedInHome): read-only
// in every child that has ~/.cache writable.
type hookStore struct {
	dir  string
	path string // this agent session's file
	// key names this agent session to the daemon (client_key): the file only says which
	// session; the daemon answers for it only if it was made with this key, so a program that
	// can write the file cannot point the hook at another of the user's sessions.
	key string
	// rootPath is the agent session's file (whatever the cwd, mode or flags) naming the
	// directory its sessions are rooted at (agentRoot).
	rootPath string
}

// commandFileTTL is how long a command file that was never run (the user said no) is kept.
const commandFileTTL = 24 * time.Hour

func hookStateDir(flagDir string) (string, error) {
	if flagDir != "" {
		return flagDir, nil
	}
	// Only a runtime dir of this user's own that no one else may write: one inherited from
	// another user (through su) would let them move the state under the hook.
	if rt := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(rt) && checkOwn(rt, true) == nil {
		return filepath.Join(rt, "sandboxd", "hook"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no $XDG_RUNTIME_DIR nor home for the hook's state: %w", err)
	}
	return filepath.Join(home, ".cache", "sandboxd", "hook"), nil
}

func newHookStore(flagDir, socket, agentSession, cwd string) (*hookStore, error) {
	dir, err := hookStateDir(flagDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("hook state directory: %w", err)
	}
	if err := checkOwn(dir, true); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(socket + "\x00" + agentSession + "\x00" + cwd))
	key := hex.EncodeToString(sum[:])
	rootSum := sha256.Sum256([]byte(socket + "\x00" + agentSession))
	return &hookStore{dir: dir, path: filepath.Join(dir, key[:32]+".session"), key: "hook:" + key,
		rootPath: filepath.Join(dir, hex.EncodeToString(rootSum[:16])+".root")}, nil
}

// agentRoot is the directory the agent session's sandboxd sessions are rooted at, whatever
// the cwd the agent has moved to, fixed by its first call: its project ($CLAUDE_PROJECT_DIR,
// which Claude Code gives its hooks) when that holds the first cwd, else that cwd. The root
// anchors the rules (`./.env`, `/src/**`) and the project's settings, as the agent's original
// cwd anchors its own, so a `cd src` the agent keeps does not move them with it; and a cwd
// outside it (and the hook's --add-dir) is refused, never a new root. Saved either way: a
// project dir left unsaved made the first cwd outside it the saved root, a session there.
// saved is true when this call saved the root.
func (s *hookStore) agentRoot(cwd string) (root string, saved bool, err error) {
	first := cwd
	if p := os.Getenv("CLAUDE_PROJECT_DIR"); filepath.IsAbs(p) && filepath.Clean(p) == p && within(cwd, p) {
		first = p
	}
	for range 2 {
		b, err := readPrivate(s.rootPath, 8<<10)
		if err == nil {
			root := strings.TrimSuffix(string(b), "\n")
			if !filepath.IsAbs(root) || filepath.Clean(root) != root {
				return "", false, fmt.Errorf("hook state %s does not hold a directory; remove it", s.rootPath)
			}
			return root, false, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", false, err
		}
		tmp, err := s.writeTemp("tmp-", first+"\n")
		if err != nil {
			return "", false, err
		}
		// link(2) fails on an existing name: of hooks racing, the first one's root stands.
		err = os.Link(tmp, s.rootPath)
		os.Remove(tmp)
		if err == nil {
			return first, true, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", false, fmt.Errorf("save hook state: %w", err)
		}
	}
	return "", false, fmt.Errorf("hook state %s keeps changing", s.rootPath)
}

// forgetRoot removes a root this hook saved but could not make a session at (a cwd that is
// gone, a daemon that is down), so the agent session's next call roots it afresh rather
// than failing on it for good. A root another hook saved meanwhile stays.
func (s *hookStore) forgetRoot(root string) {
	if b, err := readPrivate(s.rootPath, 8<<10); err == nil && strings.TrimSuffix(string(b), "\n") == root {
		os.Remove(s.rootPath)
	}
}

// within reports whether path is dir or lies below it (both absolute and clean).
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// checkOwn refuses a state path that is not this user's own, or that others may write.
func checkOwn(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("hook state: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 || fi.IsDir() != dir || (!dir && !fi.Mode().IsRegular()) {
		return fmt.Errorf("hook state %s is not this user's own private %s; remove it", path, map[bool]string{true: "directory", false: "file"}[dir])
	}
	return nil
}

// load returns the saved session id, "" when there is none.
func (s *hookStore) load() (string, error) {
	b, err := readPrivate(s.path, 256)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	id := strings.TrimSpace(string(b))
	if id == "" || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return "", fmt.Errorf("hook state %s does not hold a session id; remove it", s.path)
	}
	return id, nil
}

// save records id. Unless replace, a session another hook saved first wins, and its id is
// returned instead.
func (s *hookStore) save(id string, replace bool) (string, error) {
	tmp, err := s.writeTemp("tmp-", id+"\n")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if replace {
		if err := os.Rename(tmp, s.path); err != nil {
			return "", fmt.Errorf("save hook state: %w", err)
		}
		return id, nil
	}
	// link(2) fails on an existing name: the first hook's session stays.
	if err := os.Link(tmp, s.path); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("save hook state: %w", err)
		}
		other, lerr := s.load()
		if lerr != nil {
			return "", lerr
		}
		if other != "" {
			return other, nil
		}
		if err := os.Rename(tmp, s.path); err != nil {
			return "", fmt.Errorf("save hook state: %w", err)
		}
	}
	return id, nil
}

// writeCommand saves a command for `sbctl bash --command-file` and returns its path.
func (s *hookStore) writeCommand(cmd string) (string, error) {
	s.sweep()
	return s.writeTemp("cmd-", cmd)
}

// writeTemp creates a new private file in the store with content. os.CreateTemp opens with
// O_CREATE|O_EXCL and mode 0600: a name that exists, a symlink included, is never opened.
func (s *hookStore) writeTemp(prefix, content string) (string, error) {
	f, err := os.CreateTemp(s.dir, prefix+"*")
	if err != nil {
		return "", fmt.Errorf("hook state: %w", err)
	}
	path := f.Name()
	_, werr := io.WriteString(f, content)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// sweep removes command files older than commandFileTTL: an asked command the user refused
// is never run, so nothing else deletes it.
func (s *hookStore) sweep() {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-commandFileTTL)
	for _, ent := range ents {
		if !strings.HasPrefix(ent.Name(), "cmd-") && !strings.HasPrefix(ent.Name(), "tmp-") {
			continue
		}
		if fi, err := ent.Info(); err == nil && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(s.dir, ent.Name()))
		}
	}
}

// readPrivate reads at most max bytes of a regular file this user owns and no one else may
// write, without following a symlink in its last component. It opens without blocking: opening
// a FIFO put in the file's place would wait for a writer, past the hook's deadline, and an agent
// runs a call whose hook never answers.
func readPrivate(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || !fi.Mode().IsRegular() || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%s is not a private regular file of this user", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes", path, max)
	}
	return b, nil
}
