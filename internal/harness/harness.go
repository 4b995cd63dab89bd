// Package harness runs a real sandboxd binary on its own socket, state directory and cgroup,
// for the fault tests and the benchmarks: start, crash, restart, and read what it left.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/cgroups/v3"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/internal/cgroupfs"
	"github.com/sandboxd/sandboxd/worker"
)

// Build compiles cmd/sandboxd into dir and returns the binary's path.
func Build(ctx context.Context, dir string) (string, error) {
	return BuildCommand(ctx, dir, "sandboxd")
}

// BuildCommand compiles cmd/NAME into dir/NAME and returns its path. It runs in the module
// root so the caller's working directory does not matter.
func BuildCommand(ctx context.Context, dir, name string) (string, error) {
	root, err := ModuleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", name, err, out)
	}
	return bin, nil
}

// ModuleRoot is the directory of the main module's go.mod.
func ModuleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the sandboxd module")
	}
	return filepath.Dir(mod), nil
}

// Daemon is a sandboxd child process on its own socket and state directory, in its own
// cgroup, so its start-up reaping of leftovers never touches another daemon's children.
type Daemon struct {
	Bin      string
	Dir      string // holds the socket, the config and (by default) the state directory
	Socket   string
	StateDir string
	Config   string

	cg     *isolation
	cmd    *exec.Cmd
	done   chan struct{}
	exit   error
	stderr *os.File
}

// Options configure Start.
type Options struct {
	Bin        string // the sandboxd binary
	Dir        string // an existing directory the daemon may use (made 0755)
	StateDir   string // default Dir/state
	ConfigYAML string // merged over the harness defaults by the daemon's own loader
}

// DefaultConfig keeps the daemon away from the host's /etc/sandboxd and lets a benchmark
// create many sessions.
func DefaultConfig(dir string) string {
	return fmt.Sprintf("policy_dir: %s\nmax_sessions_per_user: 1000\ndrain_timeout_sec: 5\n", filepath.Join(dir, "policy.d"))
}

// Start starts a daemon and waits until it answers healthz.
func Start(ctx context.Context, o Options) (*Daemon, error) {
	if err := os.Chmod(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("chmod daemon dir: %w", err)
	}
	d := &Daemon{Bin: o.Bin, Dir: o.Dir, Socket: filepath.Join(o.Dir, "sandboxd.sock"),
		StateDir: o.StateDir, Config: filepath.Join(o.Dir, "sandboxd.yaml")}
	if d.StateDir == "" {
		d.StateDir = filepath.Join(o.Dir, "state")
	}
	cfg := o.ConfigYAML
	if cfg == "" {
		cfg = DefaultConfig(o.Dir)
	}
	if err := os.WriteFile(d.Config, []byte(cfg), 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	cg, err := newIsolation("sbtest-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36))
	if err != nil {
		return nil, err
	}
	d.cg = cg
	if err := d.Restart(ctx); err != nil {
		cg.remove()
		return nil, err
	}
	return d, nil
}

// Restart starts the daemon process again on the same socket, state and cgroup (after Kill
// or Stop): what a supervisor does after a crash.
func (d *Daemon) Restart(ctx context.Context) error {
	if d.Running() {
		return errors.New("daemon is still running")
	}
	stderr, err := os.OpenFile(filepath.Join(d.Dir, "sandboxd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open daemon log: %w", err)
	}
	args := []string{d.Bin, "--socket", d.Socket, "--state-dir", d.StateDir, "--config", d.Config, "--log-level", "warn"}
	d.cmd = d.cg.command(args)
	d.cmd.Stdout, d.cmd.Stderr = stderr, stderr
	d.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if err := d.cmd.Start(); err != nil {
		stderr.Close()
		return fmt.Errorf("start sandboxd: %w", err)
	}
	d.stderr, d.done, d.exit = stderr, make(chan struct{}), nil
	go func(cmd *exec.Cmd, done chan struct{}) {
		d.exit = cmd.Wait()
		close(done)
	}(d.cmd, d.done)
	c := client.NewWith(d.Socket, client.Options{Timeout: 2 * time.Second})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Health(ctx); err == nil {
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("sandboxd exited during start-up (%v): %s", d.exit, d.LogTail(2000))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = d.Kill()
			return fmt.Errorf("sandboxd did not answer healthz within 30s: %s", d.LogTail(2000))
		}
	}
}

// Client returns a client of the daemon that keeps its connections, as an agent harness
// would, with a per-request timeout (0: none).
func (d *Daemon) Client(timeout time.Duration) *client.Client {
	return client.NewWith(d.Socket, client.Options{KeepAlive: 256, Timeout: timeout})
}

// Running reports whether the daemon process is alive.
func (d *Daemon) Running() bool {
	if d.done == nil {
		return false
	}
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// Pid is the daemon's pid (the wrapper shell execs the daemon, so it is the same process).
func (d *Daemon) Pid() int { return d.cmd.Process.Pid }

// Kill sends SIGKILL and waits for the process to go: a crash.
func (d *Daemon) Kill() error {
	if !d.Running() {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	d.stderr.Close()
	return nil
}

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig syscall.Signal) error { return d.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits for the drain; past timeout it kills.
func (d *Daemon) Stop(timeout time.Duration) error {
	if !d.Running() {
		return nil
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(timeout):
		_ = d.Kill()
		return fmt.Errorf("sandboxd did not stop within %s of SIGTERM", timeout)
	}
	d.stderr.Close()
	var ee *exec.ExitError
	if errors.As(d.exit, &ee) {
		return fmt.Errorf("sandboxd exited with %v: %s", d.exit, d.LogTail(2000))
	}
	return nil
}

// Close kills the daemon and everything in its cgroup, then removes the cgroup.
func (d *Daemon) Close() {
	_ = d.Kill()
	d.cg.remove()
}

// LogTail is the last n bytes of the daemon's stderr.
func (d *Daemon) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, "sandboxd.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// RSS is the daemon's resident set in bytes (VmRSS).
func (d *Daemon) RSS() (int64, error) { return RSSOf(d.Pid()) }

// RSSOf reads VmRSS of pid from /proc.
func RSSOf(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read rss: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", v, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// SubtreeDirs are the daemon's cgroup subtree roots (<own cgroup>/sandboxd), one per
// hierarchy the sandbox uses, as sandbox/cgroup.go lays them out.
func (d *Daemon) SubtreeDirs() []string {
	var out []string
	for _, dir := range d.cg.dirs {
		out = append(out, filepath.Join(dir, "sandboxd"))
	}
	return out
}

// SubtreeProcs lists the pids in the daemon's cgroup subtree (sessions' workers and calls),
// leaving out the sandbox's idle pooled inits: started ahead of any call, they belong to none.
func (d *Daemon) SubtreeProcs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, root := range d.SubtreeDirs() {
		for _, p := range cgroupfs.ProcsUnder(root) {
			if !seen[p] && !idlePoolInit(p) {
				seen[p] = true
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// SubtreeCgroups lists the cgroup directories below the subtree roots (relative, deduplicated
// across hierarchies): <session> and <session>/<call> for calls started for themselves,
// pool/<n> for calls handed to a pooled init. The pool's parent and the cgroups of idle pooled
// inits are left out.
func (d *Daemon) SubtreeCgroups() []string {
	seen := map[string]bool{}
	var out []string
	for _, root := range d.SubtreeDirs() {
		_ = filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
			if err != nil || !e.IsDir() || path == root {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			// Every cgroup sits under its user's, user-<uid>: named here without it.
			user, rest, _ := strings.Cut(rel, "/")
			if !strings.HasPrefix(user, "user-") || rest == "" {
				return nil
			}
			rel = rest
			if rel == poolDir || seen[rel] {
				return nil
			}
			if filepath.Dir(rel) == poolDir && idlePoolCgroup(path) {
				return nil
			}
			seen[rel] = true
			out = append(out, rel)
			return nil
		})
	}
	return out
}

// HoldsWorker reports whether the cgroup rel (as SubtreeCgroups names it) holds a session's
// file worker, which runs in pool/<n> when it came from the pool.
func (d *Daemon) HoldsWorker(rel string) bool {
	for _, root := range d.SubtreeDirs() {
		users, _ := filepath.Glob(filepath.Join(root, "user-*", rel))
		for _, dir := range users {
			for _, p := range cgroupfs.ProcsUnder(dir) {
				if args := cmdline(p); len(args) > 1 && args[1] == worker.Arg {
					return true
				}
			}
		}
	}
	return false
}

// poolDir and poolArg are sandbox's: <root>/user-<uid>/pool holds the pooled inits, each started as
// "sandboxd-init __sandboxd_init__ pool" (sandbox/pool.go, nsinit.h).
const (
	poolDir = "pool"
	initArg = "__sandboxd_init__"
	poolArg = "pool"
)

// idlePoolInit reports whether pid is a pooled init still waiting for a call. A claimed one
// keeps that command line only until it execs its call's program, a few hundred µs.
func idlePoolInit(pid int) bool {
	args := cmdline(pid)
	return len(args) == 3 && args[1] == initArg && args[2] == poolArg
}

// idlePoolCgroup reports whether the pool cgroup dir holds an idle pooled init and nothing
// else. An empty one is a call's not yet removed, or one being filled: it is listed.
func idlePoolCgroup(dir string) bool {
	pids := cgroupfs.ProcsUnder(dir)
	for _, p := range pids {
		if !idlePoolInit(p) {
			return false
		}
	}
	return len(pids) > 0
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// AuditDir is the state directory's audit log.
func (d *Daemon) AuditDir() string { return filepath.Join(d.StateDir, "audit") }

// PublicKey is the audit log's verification key.
func (d *Daemon) PublicKey() (ed25519.PublicKey, error) {
	return audit.LoadPublicKey(filepath.Join(d.StateDir, "audit-key", "audit.pub"))
}

// VerifyAudit checks the chain, checkpoints and head with the public key. Run it with the
// daemon stopped, or the head may trail the last records.
func (d *Daemon) VerifyAudit() (*audit.VerifyReport, error) {
	pub, err := d.PublicKey()
	if err != nil {
		return nil, err
	}
	return audit.VerifyDir(d.AuditDir(), pub)
}

// Records reads every audit record.
func (d *Daemon) Records() ([]*audit.Record, error) {
	var out []*audit.Record
	for r, err := range audit.Query(d.AuditDir(), audit.Filter{}) {
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ProcComm is /proc/<pid>/comm: "" once the process is gone or a zombie (dead, only its
// exit status left for a parent to collect).
func ProcComm(pid int) string {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// The state follows the ")" that closes the command name, which may itself hold ")".
	if i := bytes.LastIndexByte(st, ')'); i < 0 || len(st) < i+3 || st[i+2] == 'Z' {
		return ""
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return string(bytes.TrimSpace(b))
}

// isolation is a cgroup of its own for one daemon. The daemon nests its subtree
// ("sandboxd") under its own cgroup and reaps that subtree at start, so two daemons in
// the same cgroup (other tests on a shared machine) would kill each other's children.
type isolation struct {
	v1   bool
	dirs map[string]string // controller ("" on v2) -> our cgroup directory
}

func newIsolation(name string) (*isolation, error) {
	iso := &isolation{dirs: map[string]string{}}
	var err error
	if cgroups.Mode() == cgroups.Unified {
		// cgroup v2: the daemon enables controllers in its own cgroup's subtree_control,
		// which the no-internal-processes rule refuses below the root when the daemon
		// itself sits there; so the daemon runs where the caller does.
		iso.dirs[""], _, err = cgroupfs.V2Dir()
		return iso, err
	}
	iso.v1 = true
	if iso.dirs, err = cgroupfs.V1Dirs(name); err != nil {
		return nil, err
	}
	for _, d := range iso.dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			iso.remove()
			return nil, fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	return iso, nil
}

// command runs argv inside the cgroup: a shell joins every hierarchy, then execs the daemon,
// so the daemon is confined from its first instruction.
func (iso *isolation) command(argv []string) *exec.Cmd {
	if !iso.v1 {
		return exec.Command(argv[0], argv[1:]...)
	}
	var procs []string
	for _, c := range cgroupfs.V1Controllers {
		procs = append(procs, filepath.Join(iso.dirs[c], "cgroup.procs"))
	}
	script := `for f in ` + strings.Join(procs, " ") + `; do echo $$ > "$f" || exit 97; done; exec "$@"`
	return exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, argv...)...)
}

// remove kills whatever is left in the cgroup and removes it bottom-up.
func (iso *isolation) remove() {
	if !iso.v1 {
		return
	}
	if frz := iso.dirs["freezer"]; frz != "" {
		for i := 0; i < 50; i++ {
			pids := cgroupfs.ProcsUnder(frz)
			if len(pids) == 0 {
				break
			}
			for _, p := range pids {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			// A daemon killed between its freeze and thaw of a call leaves that call frozen,
			// and a frozen task does not die of the SIGKILL until its cgroup thaws.
			_ = cgroupfs.ThawTree(frz, "freezer.state", "THAWED")
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, d := range iso.dirs {
		var sub []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				sub = append(sub, path)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			for j := 0; j < 100; j++ {
				if err := syscall.Rmdir(sub[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// Input encodes a tool input.
func Input(v map[string]any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a map of plain values always encodes
	}
	return b
}
