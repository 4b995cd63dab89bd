package sandbox

import (
	"fmt"
	"os"
	"slices"
	"strconv"
)

// Spec describes one execution.
type Spec struct {
	Path string   // program to exec; may be "/proc/self/exe" (the daemon's own binary)
	Args []string // arguments after argv[0]; argv[0] is Path
	Env  []string // the whole environment; nothing of the daemon's leaks
	Dir  string   // working directory
	// Direct, when set, is a simple command run as `bash -c` would exec it, without starting
	// bash: argv[0] as typed, searched in Env's PATH (as the caller, inside the confinement)
	// unless it holds a slash, PWD, SHLVL=0 and _ added to Env, only stdio open. Like every
	// program it runs in a child of the init, which stays PID 1 (reaping orphans, exiting with
	// the program's status, 128+N for a signal). Only the literal words of a command that is
	// not a bash builtin belong here (classifier.SimpleCommand). Path and Args (bash with the whole
	// command) run instead whenever the result could differ: the program is missing, cannot be
	// exec'd, or Env has PWD, SHLVL or _ already. ExtraFiles are for Path only.
	Direct []string

	UID    uint32
	GID    uint32
	Groups []uint32
	// Tenant is the user whose cgroup (user-<uid>, its limits on all that user's calls
	// together) the call runs in, when that is not UID: the owner of the subordinate uid range
	// UID lies in. 0: UID's own.
	Tenant uint32
	// Undumpable runs the program with a real gid (OverflowGID) other than its effective one
	// (GID, which every access check uses), so the kernel makes it non-dumpable from its first
	// instruction: no process of the caller's can ptrace it or read its memory. For the
	// daemon's own helpers that run as the caller and answer the daemon (the file worker), which
	// the caller must not be able to take over; not for a caller's programs, whose debuggers
	// would stop working.
	Undumpable bool
	// Umask is the file mode creation mask the program runs with (the daemon's own, often
	// 0077 under systemd, is never passed on).
	Umask uint32

	// WritableDirs are the session's dirs and configured cache dirs; read-only when
	// ReadOnlyWorkspace. Nothing else is ever writable (a worktree's ".git" file is not
	// followed: its main repository must be a session dir of its own).
	WritableDirs []string
	// DirsLeadTo is where each session dir led, resolved as the caller (ResolveDirs), when the
	// session was given it: one that resolves elsewhere now was replaced by a link (or its
	// link retargeted) since, and Start refuses the call with ErrDirMoved rather than run it
	// outside the dirs it was decided for.
	DirsLeadTo map[string]string
	// ReadOnlyWorkspace: the call was allowed because it only reads (or runs in plan mode):
	// WritableDirs are mounted read-only, only the private /tmp is writable.
	ReadOnlyWorkspace bool
	// ProtectedPaths (absolute) and ProtectedPatterns (absolute path-rule patterns, expanded in
	// the writable dirs) are mounted read-only where they exist inside a writable dir: the
	// protected paths (ProtectedCandidates) and the Edit deny rules.
	ProtectedPaths    []string
	ProtectedPatterns []string
	// MoveAsideCreated: a protected path missing when the call starts that exists when it has
	// ended was made by the call (mounts can protect only what exists): it is moved aside, as
	// the caller, to NAME.sandboxd-blocked-CALL, and named in Result.MovedAside.
	MoveAsideCreated bool
	// WatchHidden is for a long-lived child (the file worker): each path it would hide that is
	// missing when it starts is watched, inside the writable dirs too, and its appearance
	// reported by Process.HiddenLost, for the caller to start a new child that hides it. A
	// call's child is not held to the ones in its writable dirs (docs/confinement.md).
	WatchHidden bool
	// KeepCreated (absolute) are paths a person approved this call to write, having seen it
	// name them: a missing protected path that is one of them is theirs and stays when the
	// call makes it a regular file. What else the call makes is moved aside all the same: a
	// dir made there (its content went unseen), a protected dir made to hold a kept path.
	KeepCreated []string
	// GuardPatterns are the ProtectedPatterns with wildcards that a call must not make new
	// matches of (the Edit deny rules): with MoveAsideCreated, a match inside a writable dir
	// that was not there when the call started is moved aside like a protected path.
	GuardPatterns []string
	// HidePatterns are absolute path-rule patterns (Read deny rules) whose matches in the
	// session's dirs are hidden like DenyPaths; literal ones belong in DenyPaths.
	HidePatterns []string
	// ReadOnlyDirs are bound read-only on top of everything else, so they show even under the
	// private /tmp (an ssh-agent or gpg-agent socket dir is allowed this way, by path).
	ReadOnlyDirs []string
	// DenyPaths are hidden: an existing dir is covered by an empty unreadable tmpfs, an
	// existing file by /dev/null, and landlock grants no read below them, so a path created
	// after the start stays unreadable too. Landlock cannot express "all but X", so in each
	// ancestor of a deny path only the entries existing at the start are readable (writable,
	// inside a writable dir); new entries directly in such an ancestor are not. DefaultDenyPaths
	// are always added (mount-hidden only: landlock does not govern connect(2)).
	DenyPaths    []string
	AllowNetwork bool // false: the session's own network namespace with loopback only
	// AllowUnixSockets lets the program create AF_UNIX sockets. Without it socket(AF_UNIX)
	// fails with EPERM (socketpair still works): connect(2) is no filesystem right, so a
	// pathname socket of a server outside the sandbox that the caller can reach would take
	// the program's requests past every other confinement.
	AllowUnixSockets bool

	Limits Limits // overrides of Config.Limits, 0 = keep

	Session string // cgroup path <CgroupRoot>/<Session>/<Call>
	Call    string

	Stdin, Stdout, Stderr *os.File
	ExtraFiles            []*os.File // fd 3, 4, ... in the child
}

// OverflowGID is the real gid of an Undumpable program: the kernel's overflow gid ("nogroup"),
// which no access check of the program uses (they use the effective gid).
const OverflowGID = 65534

// realGID is the real gid spec's program runs with.
func realGID(spec *Spec) uint32 {
	switch {
	case !spec.Undumpable:
		return spec.GID
	case spec.GID == OverflowGID: // the caller's own: any other gid will do
		return OverflowGID - 1
	}
	return OverflowGID
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 200 {
		return false
	}
	for _, c := range s {
		if c == '/' || c == 0 || c == '\n' {
			return false
		}
	}
	return true
}

func (spec *Spec) validate() error {
	switch {
	case spec.Path == "":
		return fmt.Errorf("%w: empty path", ErrBadSpec)
	case !validName(spec.Session) || !validName(spec.Call):
		return fmt.Errorf("%w: session and call must be single path elements", ErrBadSpec)
	case spec.Session == poolDir:
		return fmt.Errorf("%w: session name %q is reserved", ErrBadSpec, poolDir)
	}
	return nil
}

// DefaultDenyPaths are hidden in every child in addition to Spec.DenyPaths: the container
// runtimes' sockets would hand out root, and a unix socket reaches its server whatever the
// network namespace: the system bus (services that act for the caller, polkit permitting) and
// screen's sessions (a command typed into the caller's own screen runs unconfined). New takes
// them as they are then.
var DefaultDenyPaths = []string{
	"/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
	"/run/podman/podman.sock", "/run/dbus", "/run/screen", "/run/snapd.socket",
	"/run/snapd-snap.socket",
}

// hiddenFor is defaultDeny (DefaultDenyPaths) and the caller's runtime directory
// (/run/user/<uid>): its session bus and systemd user manager run whatever they are asked
// outside the sandbox (systemd-run --user), and its gpg-agent, keyring and editor sockets act
// with the caller's keys and rights. An agent socket the policy allows is exposed by path (a session directory).
func hiddenFor(defaultDeny []string, uid uint32) []string {
	return append(slices.Clone(defaultDeny), "/run/user/"+strconv.FormatUint(uint64(uid), 10))
}

// tenant is the uid whose user cgroup the call runs in, and whose share of every per-user
// budget the daemon keeps (files held open, the CPU of its walks) the call takes: a user's
// subordinate uids share their owner's, or each would bring a whole share of its own.
func (s *Spec) tenant() uint32 {
	if s.Tenant != 0 {
		return s.Tenant
	}
	return s.UID
}
