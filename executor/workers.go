package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// ToolState is what the built-in tools keep on a Host: the per-session file workers, the
// background tasks, the results held for the aggregate budget and the mode before plan mode.
// The zero value is ready; set the exported fields before the first call.
type ToolState struct {
	// Registry lists the registered tools, for ToolSearch. Nil: ToolSearch says it is unavailable.
	Registry func() []*Tool
	// PersistCwd reports whether a session asked for `cd` in Bash to carry over to its next
	// calls (only ever inside its directories). Nil: never.
	PersistCwd func(s *session.Session) bool
	// WorkerPath is the binary the worker is started from; "" means /proc/self/exe.
	WorkerPath string
	// BashOutputHardCapBytes kills a command whose output passes it; 0 means 5 GB (COMPAT).
	BashOutputHardCapBytes int64

	mu       sync.Mutex
	workers  map[string]*workerEntry
	tasks    map[string]*task
	running  map[*bashRun]*session.Session // foreground commands, by the session they run in
	budgeted map[string]map[string]string  // session -> tool_use_id -> result text
	wg       sync.WaitGroup                // worker and task goroutines
}

func (h *Host) tools() *ToolState { return &h.toolState }

// Tools is the built-in tools' state on h, for wiring (Registry, PersistCwd).
func (h *Host) Tools() *ToolState { return h.tools() }

type workerEntry struct {
	mu      sync.Mutex // serializes starts of this session's worker
	client  *worker.Client
	dirs    []string
	rules   *permission.RuleSet // the rules its hidden and protected paths came from
	spec    sandbox.Spec        // the confinement it was started in (workerSpec's, before its files)
	cfgGen  uint64              // the Host's configuration generation it was started under
	proc    *sandbox.Process
	checked time.Time // when its hidden paths were last found hidden (Process.HiddenLost)
	cancel  context.CancelFunc
	exited  chan struct{}
}

// Worker returns the session's file worker, starting it (or a new one, when the last died
// or the session's directories or rules changed, which the worker's mounts depend on) as needed.
func (h *Host) Worker(ctx context.Context, s *session.Session) (*worker.Client, error) {
	ts := h.tools()
	ts.mu.Lock()
	if s.Closed() {
		// Removed: StopSession has swept, or is about to sweep, its workers; one made now
		// would outlive it with nobody to stop it.
		ts.mu.Unlock()
		return nil, errSessionClosed(s)
	}
	if ts.workers == nil {
		ts.workers = map[string]*workerEntry{}
	}
	e := ts.workers[s.ID]
	if e == nil {
		e = &workerEntry{}
		ts.workers[s.ID] = e
	}
	ts.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	// StopSession drops the entry before it takes e.mu to stop its worker: an entry no longer
	// in the table was stopped, or will be once this returns, so start nothing in it.
	ts.mu.Lock()
	current := ts.workers[s.ID] == e
	ts.mu.Unlock()
	if !current {
		return nil, errSessionClosed(s)
	}
	dirs := s.Dirs()
	rules := s.RuleSet()
	gen := h.cfgGen.Load()
	if e.client != nil {
		select {
		case <-e.client.Done():
		default:
			// A path the worker hides that appeared since it started (a ~/.aws the user made
			// on the host) is not hidden from it: its mounts were made on what existed then.
			if now := time.Now(); now.Sub(e.checked) >= hiddenCheckEvery {
				lost, err := e.proc.HiddenLost()
				if err != nil {
					return nil, errcode.New(errcode.SandboxSetup, fmt.Errorf("look at the paths the file worker hides: %w", err))
				}
				if lost != "" {
					h.logger().Info("restarting the file worker: a path it hides appeared or was replaced since it started",
						zap.String("session", s.ID), zap.String("path", lost))
					break
				}
				e.checked = now
			}
			if slices.Equal(dirs, e.dirs) && rules == e.rules && gen == e.cfgGen {
				return e.client, nil
			}
			// New rules or a reloaded configuration under which a worker would start in
			// exactly this one's confinement keep it: a session's first rules, read through
			// the worker that checked its directories, usually do.
			if slices.Equal(dirs, e.dirs) && reflect.DeepEqual(*h.workerSpec(s), e.spec) {
				e.rules, e.cfgGen = rules, gen
				return e.client, nil
			}
		}
		e.stop()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Started first: the order of a field's read and a call in one return is unspecified.
	err := h.startWorker(s, e, dirs, rules, gen)
	return e.client, err
}

// hiddenCheckEvery is how long a worker found to hide all it should is taken to still do: the
// look costs a few dozen µs (as the owner, a stat per hidden path), and a call fetches its
// worker two or three times within this.
const hiddenCheckEvery = time.Millisecond

// writer is the session's worker for a write to path. A write under a protected path gets a
// worker started now: a worker's mounts are planned when it starts, so one started before the
// protected path existed (a `git init` since) would not have it read-only.
// The path as asked and as the decision resolved it both count: a symlink names one place,
// the write lands at the other.
//
// What git's configs name as hooks or config (a project's .githooks, an included
// ~/.gitconfig.local), and what the shells' start-up files source or put on PATH, is refused:
// the policy's names do not know it, and what the worker makes there, where none was, no sweep
// moves aside; the user's next git command or shell would run it.
func (h *Host) writer(ctx context.Context, s *session.Session, paths ...string) (*worker.Client, error) {
	candidates := sandbox.ProtectedCandidates(s.Dirs(), s.Cwd(), s.Owner.Home, s.HomeLeadsTo())
	named, err := configNamed(s, candidates)
	if err != nil {
		return nil, err
	}
	for _, n := range named {
		for _, path := range paths {
			if path != "" && insideDir(path, n.path) {
				return nil, errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("%s is where %s (%s): %s would run what is written there, so file tools do not write it; ask the user to write it", path, n.what, n.path, n.runner))
			}
		}
	}
	for _, p := range candidates {
		if slices.ContainsFunc(paths, func(path string) bool { return path != "" && insideDir(path, p) }) {
			h.restartWorker(s)
			break
		}
	}
	return h.Worker(ctx, s)
}

// namedPath is a path a protected config names as code or config its program runs.
type namedPath struct {
	path    string
	special string // the PathFact.Special a write there gets
	what    string // what names it, for a refusal
	runner  string // what would run it
}

// configNamed is what s's owner's protected configs name: what the git configs among s's
// protected candidates take hooks, config or programs from (sandbox.GitNamedPaths), and what
// the shells' start-up files source, run or put on PATH (sandbox.ShellNamedPaths), what ssh's
// and vim's configs and the tools' (npm, kubectl, ...) include or run (sandbox.ToolNamedPaths, marked as the shells' are), and what the
// agents' settings run (sandbox.AgentNamedPaths), read as s's owner.
func configNamed(s *session.Session, candidates []string) ([]namedPath, error) {
	o := s.Owner
	git, err := sandbox.GitNamedPaths(o.UID, o.GID, o.Groups, candidates, o.Home)
	if err != nil {
		return nil, err
	}
	shell, err := sandbox.ShellNamedPaths(o.UID, o.GID, o.Groups, o.Home)
	if err != nil {
		return nil, err
	}
	tools, err := sandbox.ToolNamedPaths(o.UID, o.GID, o.Groups, o.Home)
	if err != nil {
		return nil, err
	}
	agent, err := sandbox.AgentNamedPaths(o.UID, o.GID, o.Groups, candidates, o.Home)
	if err != nil {
		return nil, err
	}
	out := make([]namedPath, 0, len(git)+len(shell)+len(tools)+len(agent))
	for _, p := range git {
		out = append(out, namedPath{path: p, special: specialGitNamed, what: "git's config takes hooks or config from", runner: "the user's next git command"})
	}
	for _, p := range shell {
		out = append(out, namedPath{path: p, special: specialShellNamed, what: "the user's shell start-up files source, run or find programs", runner: "the user's next shell"})
	}
	for _, p := range tools {
		out = append(out, namedPath{path: p, special: specialShellNamed, what: "the user's ssh, vim or tools' configs include, run or load", runner: "the user's next ssh (git over ssh too), vim, npm, kubectl, cargo, aws or psql"})
	}
	for _, p := range agent {
		out = append(out, namedPath{path: p, special: specialAgentNamed, what: "the agent's settings run hooks, helpers or MCP servers", runner: "the agent, outside any sandbox"})
	}
	return out, nil
}

// specialGitNamed marks a written path where git's configs take hooks, config or a program
// from, specialShellNamed one the shells' start-up files name and specialAgentNamed one the
// agents' settings run (markConfigNamed); the policy holds them as protected paths.
const (
	specialGitNamed   = "git_named"
	specialShellNamed = "shell_named"
	specialAgentNamed = "agent_named"
)

// markConfigNamed marks each written path that lies where the session owner's protected
// configs name (configNamed: a project's .githooks, an included ~/.gitconfig.local,
// core.fsmonitor's ./tools/fsmonitor, a file ~/.bashrc sources, a dir it puts on PATH). The
// policy's protected names cannot know these; marked, they ask as .git/hooks does, for a
// file tool, a Bash command's path and a call the agent runs itself alike.
func (h *Host) markConfigNamed(c *Call, paths []permission.PathFact) error {
	if c == nil || c.Session == nil || !slices.ContainsFunc(paths, func(f permission.PathFact) bool { return f.Access == permission.Write }) {
		return nil
	}
	s := c.Session
	named, err := configNamed(s, sandbox.ProtectedCandidates(s.Dirs(), s.Cwd(), s.Owner.Home, s.HomeLeadsTo()))
	if err != nil || len(named) == 0 {
		return err
	}
	for i := range paths {
		f := &paths[i]
		if f.Access != permission.Write || f.Special != "" {
			continue
		}
		if j := slices.IndexFunc(named, func(n namedPath) bool {
			return insideDir(f.Requested, n.path) || insideDir(f.Resolved, n.path)
		}); j >= 0 {
			f.Special = named[j].special
		}
	}
	return nil
}

// restartWorker stops the session's worker, if any; the next Worker starts a new one.
func (h *Host) restartWorker(s *session.Session) {
	ts := h.tools()
	ts.mu.Lock()
	e := ts.workers[s.ID]
	ts.mu.Unlock()
	if e != nil {
		e.mu.Lock()
		e.stop()
		e.mu.Unlock()
	}
}

// stop ends the worker and waits for it; e.mu is held.
func (e *workerEntry) stop() {
	if e.client == nil {
		return
	}
	e.client.Close()
	select {
	case <-e.exited:
	case <-time.After(2 * time.Second):
		e.cancel() // kills its cgroup
		<-e.exited
	}
	e.cancel()
	e.client = nil
}

// WARNING: the worker is what keeps the root daemon from opening user paths: it must run as
// the session owner inside the session's confinement. Rerun TestWriteTool and TestBashTool as root (they check the owner's uid).
func (h *Host) startWorker(s *session.Session, e *workerEntry, dirs []string, rules *permission.RuleSet, gen uint64) error {
	if h.sandbox == nil {
		return errcode.Msg(errcode.Unavailable, "the file tools are unavailable: the daemon has no sandbox configured; ask the administrator")
	}
	if _, err := h.resultsDir(s); err != nil {
		return err
	}
	daemonEnd, childEnd, err := worker.Socketpair()
	if err != nil {
		return errcode.New(errcode.SandboxSetup, err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		daemonEnd.Close()
		childEnd.Close()
		return errcode.New(errcode.SandboxSetup, fmt.Errorf("worker stderr pipe: %w", err))
	}
	spec := h.workerSpec(s)
	started := *spec
	// The worker answers the root daemon: its owner must not be able to ptrace it into saying
	// anything (frames of 256 MiB, or false answers).
	spec.Undumpable = true
	spec.WatchHidden = true // long-lived: what it hides may appear after it started (Worker)
	spec.ExtraFiles = []*os.File{childEnd}
	spec.Stderr = stderrW
	wctx, cancel := context.WithCancel(context.Background())
	proc, err := h.sandbox.Start(wctx, spec)
	childEnd.Close()
	stderrW.Close()
	if err != nil {
		cancel()
		daemonEnd.Close()
		stderrR.Close()
		return errcode.Setup(fmt.Errorf("start the file worker: %w", err))
	}
	client, err := worker.NewClient(daemonEnd)
	if err != nil {
		cancel()
		_ = proc.Kill("worker_setup")
		_, _ = proc.Wait()
		stderrR.Close()
		return errcode.New(errcode.SandboxSetup, err)
	}
	exited := make(chan struct{})
	log := h.logger().With(zap.String("session", s.ID))
	ts := h.tools()
	ts.wg.Add(2)
	go func() {
		defer ts.wg.Done()
		logLines(log, stderrR)
	}()
	go func() {
		defer ts.wg.Done()
		res, err := proc.Wait()
		client.Close()
		cancel()
		if err != nil {
			log.Warn("file worker wait", zap.Error(err))
		} else if res.ExitCode != 0 || res.KilledBy != "" {
			log.Info("file worker exited", zap.Int("exit_code", res.ExitCode), zap.String("killed_by", res.KilledBy),
				zap.Bool("oom", res.OOMKilled))
		}
		close(exited)
	}()
	e.client, e.dirs, e.rules, e.spec, e.cfgGen, e.proc, e.cancel, e.exited = client, dirs, rules, started, gen, proc, cancel, exited
	return nil
}

// workerSpec is the confinement a worker of s starts in now. Writable: the worker is
// long-lived and serves every mode; the policy keeps plan mode from writing, not the worker's
// mounts. Its hidden and protected paths are the rules'.
func (h *Host) workerSpec(s *session.Session) *sandbox.Spec {
	path := h.tools().WorkerPath
	if path == "" {
		path = "/proc/self/exe"
	}
	spec := h.Spec(s, false, "worker", []string{path, worker.Arg})
	// At the root, not the cwd: every request names its paths and dirs, and a worker must not
	// fail to start because a persisted cwd is gone (the next Bash call resets that).
	spec.Dir = s.Root
	return spec
}

func (h *Host) logger() *zap.Logger {
	if h.log == nil {
		return zap.NewNop()
	}
	return h.log
}

// logLines logs the worker's stderr (panics, fatal errors) a bounded amount at a time.
func logLines(log *zap.Logger, f *os.File) {
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 4096)
	n := 0
	for sc.Scan() {
		if n++; n <= 100 {
			log.Warn("file worker stderr", zap.String("line", sc.Text()))
		}
	}
}

// withWorker runs fn on the session's worker, once more on a fresh worker if the first died
// under it. Only idempotent operations (reads, stats, globs, greps) use it.
func (h *Host) withWorker(ctx context.Context, s *session.Session, fn func(*worker.Client) error) error {
	for attempt := 0; ; attempt++ {
		w, err := h.Worker(ctx, s)
		if err != nil {
			return err
		}
		err = fn(w)
		if err == nil || attempt > 0 || !errors.Is(err, worker.ErrGone) {
			return err
		}
	}
}

// Resolve resolves path as the session owner: symlinks, `..`, `//`. special is "device",
// "fifo", "socket" or "proc" for paths never to be read, "hidden" for one the sandbox hides
// (hiddenSpecial). The policy decides on this.
func (h *Host) Resolve(ctx context.Context, s *session.Session, path string) (resolved, special string, err error) {
	err = h.withWorker(ctx, s, func(w *worker.Client) error {
		resolved, special, err = w.Resolve(ctx, path)
		return err
	})
	if err != nil {
		return resolved, special, err
	}
	return resolved, h.hiddenSpecial(s, path, resolved, special), nil
}

// ReadFileAs reads a small file (a settings file) as the session owner.
func (h *Host) ReadFileAs(ctx context.Context, s *session.Session, path string, maxBytes int64) ([]byte, error) {
	var b []byte
	err := h.withWorker(ctx, s, func(w *worker.Client) error {
		var err error
		b, err = w.ReadFile(ctx, path, maxBytes)
		return err
	})
	return b, err
}

// ReadSettingsAs is ReadFileAs for a settings file of the owner's, which the session's
// children keep read-only: one that appeared after the session's worker started (the user
// made it, or a remembered approval did) is out of that worker's reach, so a read it refuses
// is made again by a fresh worker, which sees the file as it is now.
// It also returns the file's owner: a project's settings are trusted only from its own user.
func (h *Host) ReadSettingsAs(ctx context.Context, s *session.Session, path string, maxBytes int64) ([]byte, uint32, error) {
	read := func() (b []byte, uid uint32, err error) {
		err = h.withWorker(ctx, s, func(w *worker.Client) error {
			info, payload, err := w.ReadFileInfo(ctx, path, maxBytes)
			if err == nil {
				b, uid = payload, info.UID
			}
			return err
		})
		return b, uid, err
	}
	b, uid, err := read()
	if errors.Is(err, fs.ErrPermission) {
		h.restartWorker(s)
		b, uid, err = read()
	}
	return b, uid, err
}

// StopSession releases what the tools hold for a deleted session: its worker, its
// background tasks, its budget bookkeeping and its persisted results.
func (h *Host) StopSession(id string) {
	ts := h.tools()
	ts.mu.Lock()
	e := ts.workers[id]
	delete(ts.workers, id)
	var victims []*task
	for tid, t := range ts.tasks {
		if t.sessionID == id {
			victims = append(victims, t)
			delete(ts.tasks, tid)
		}
	}
	delete(ts.budgeted, id)
	var foreground []*bashRun
	for r, s := range ts.running {
		if s.ID == id {
			foreground = append(foreground, r)
		}
	}
	ts.mu.Unlock()
	for _, t := range victims {
		t.run.kill(killedSessionDeleted)
		<-t.run.done
	}
	for _, r := range foreground {
		r.kill(killedSessionDeleted) // its caller waits for it and reports it
	}
	if e != nil {
		e.mu.Lock()
		e.stop()
		e.mu.Unlock()
	}
	if h.StateDir != "" && validSessionID(id) {
		h.resultsMade.Delete(id)
		_ = os.RemoveAll(h.ResultsDir(id))
		h.ledger.forgetSession(id)
	}
}

// CloseTools stops every worker and task (daemon shutdown) and waits for their goroutines.
func (h *Host) CloseTools() {
	ts := h.tools()
	ts.mu.Lock()
	ids := map[string]bool{}
	for id := range ts.workers {
		ids[id] = true
	}
	for _, t := range ts.tasks {
		ids[t.sessionID] = true
	}
	ts.mu.Unlock()
	for id := range ids {
		h.StopSession(id)
	}
	ts.wg.Wait()
}

func validSessionID(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 200 {
		return false
	}
	for _, c := range id {
		if c == '/' || c == 0 {
			return false
		}
	}
	return true
}
