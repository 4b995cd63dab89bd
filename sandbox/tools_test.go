package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostGit runs git on the host side of the fixture.
func hostGit(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid",
		"-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", "-c", "safe.directory=*"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM=1"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func chownR(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, nobody, nobody)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRealTools: the tools agents use keep working under the full confinement.
func TestRealTools(t *testing.T) {
	t.Parallel()
	base := hostTempDir(t, "/var/tmp", "sbx-tools-")
	// A fake docker.sock denied by default, named through a symlinked dir, as
	// /var/run/docker.sock is: the child must mount over the resolved path (it follows no
	// symlink while it mounts).
	dockerSock := filepath.Join(base, "docker.sock")
	s := newTestSandbox(t, Config{}, func(sm *seams) {
		sm.defaultDeny = append(sm.defaultDeny, filepath.Join(base, "runlink", "docker.sock"))
	})
	os.Chmod(base, 0o755)
	repo, sub, wt, cache := filepath.Join(base, "repo"), filepath.Join(base, "sub"),
		filepath.Join(base, "wt"), filepath.Join(base, "cache")
	for _, d := range []string{repo, sub, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{repo, sub} {
		hostGit(t, d, "init", "-q")
		os.WriteFile(filepath.Join(d, "README"), []byte("hello secret-free\n"), 0o644)
		hostGit(t, d, "add", "README")
		hostGit(t, d, "commit", "-qm", "init")
	}
	hostGit(t, repo, "submodule", "add", "-q", "../sub", "sub")
	hostGit(t, repo, "commit", "-qm", "sub")
	hostGit(t, repo, "worktree", "add", "-q", wt)
	chownR(t, base)

	// An ssh-agent style socket under the host's /tmp, exposed by path.
	agentDir := hostTempDir(t, "/tmp", "sbx-agent-")
	os.Chmod(agentDir, 0o755)
	agentSock := filepath.Join(agentDir, "agent.sock")
	serveUnix(t, agentSock, "agent-hello\n")

	dl, err := net.Listen("unix", dockerSock)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	os.Chmod(dockerSock, 0o777)
	if err := os.Symlink(base, filepath.Join(base, "runlink")); err != nil {
		t.Fatal(err)
	}

	hostUserNS, _ := os.Readlink("/proc/self/ns/user")
	pyConnect := `python3 -c 'import socket,sys
s=socket.socket(socket.AF_UNIX)
try: s.connect(sys.argv[1]); print("connected", s.recv(100).decode().strip())
except OSError as e: print("refused", e.errno)' `
	const gitc = "git -c user.name=a -c user.email=a@example.invalid"

	cases := []struct {
		name   string
		script string
		dir    string
		spec   func(*Spec)
		want   []string
	}{
		// A worktree's and a submodule's git dirs lie outside them: the session names the
		// main repository too (the .git file itself widens nothing).
		{name: "git_worktree_gitdir_outside", dir: wt,
			spec:   func(s *Spec) { s.WritableDirs = append(s.WritableDirs, repo) },
			script: "echo y > f && " + gitc + " add f && " + gitc + " commit -qm wt && git log --oneline | wc -l",
			want:   []string{"3\n"}},
		{name: "git_submodule_gitdir_outside", dir: filepath.Join(repo, "sub"),
			spec:   func(s *Spec) { s.WritableDirs = append(s.WritableDirs, repo) },
			script: "echo y > f && " + gitc + " add f && " + gitc + " commit -qm insub && git log --oneline | wc -l",
			want:   []string{"2\n"}},
		{name: "git_status_in_repo", dir: repo, script: "git status --short; git submodule status | cut -c43-",
			want: []string{"sub (heads/main)"}},
		{name: "readonly_dir_inside_writable", dir: repo,
			spec:   func(s *Spec) { s.ReadOnlyDirs = []string{filepath.Join(repo, "sub")} },
			script: "echo x > sub/f; echo x > g && echo wrote-g", want: []string{"Read-only file system", "wrote-g"}},
		{name: "cache_dir_writable_by_config", dir: repo,
			spec:   func(s *Spec) { s.WritableDirs = append(s.WritableDirs, cache) },
			script: "echo pkg > " + cache + "/pkg && echo cached", want: []string{"cached"}},
		{name: "cache_dir_not_configured", dir: repo,
			script: "echo pkg > " + cache + "/pkg2", want: []string{"Read-only file system"}},
		// The sockets' hide list, which is what stands where the config allows unix sockets.
		{name: "ssh_agent_socket_allowed_by_path", dir: repo,
			spec:   func(s *Spec) { s.ReadOnlyDirs, s.AllowUnixSockets = []string{agentDir}, true },
			script: pyConnect + agentSock, want: []string{"connected agent-hello"}},
		{name: "ssh_agent_socket_not_allowed", dir: repo,
			spec:   func(s *Spec) { s.AllowUnixSockets = true },
			script: pyConnect + agentSock, want: []string{"refused 2"}},
		{name: "docker_sock_denied_by_default", dir: repo,
			spec:   func(s *Spec) { s.AllowUnixSockets = true },
			script: pyConnect + dockerSock, want: []string{"refused 111"}},
		{name: "ssh_agent_socket_unix_sockets_refused", dir: repo,
			spec:   func(s *Spec) { s.ReadOnlyDirs = []string{agentDir} },
			script: pyConnect + agentSock, want: []string{"PermissionError"}},
		{name: "go_worker_via_proc_self_exe", dir: repo,
			spec: func(s *Spec) {
				s.Path, s.Args = "/proc/self/exe", []string{"worker", "x"}
				s.Env = append(s.Env, workerEnv+"=1")
			},
			want: []string{"worker ok args=[worker x] child=child"}},
		{name: "bash", dir: repo, script: `bash -c 'echo bash ${BASH_VERSINFO[0]}; ls | wc -l'`, want: []string{"bash 5"}},
		{name: "coreutils", dir: repo, script: "sort README | head -1 | tr a-z A-Z; du -s . >/dev/null && echo du",
			want: []string{"HELLO SECRET-FREE", "du"}},
		{name: "ripgrep", dir: repo, script: "rg -c hello README", want: []string{"1\n"}},
		{name: "python", dir: repo, script: `python3 -c 'import subprocess,threading,tempfile
t=threading.Thread(target=print,args=("thread",)); t.start(); t.join()
print(subprocess.run(["echo","sub"],capture_output=True,text=True).stdout.strip())
with tempfile.NamedTemporaryFile() as f: print("tmp", f.name.startswith("/tmp"))'`,
			want: []string{"thread", "sub", "tmp True"}},
		{name: "node", dir: repo, script: `node -e 'const cp=require("child_process"),fs=require("fs");
fs.writeFileSync("/tmp/n","x"); console.log("node", cp.execSync("echo kid").toString().trim(), fs.readFileSync("README","utf8").length)'`,
			want: []string{"node kid 18"}},
		{name: "no_user_namespace_used", dir: repo, script: "readlink /proc/self/ns/user",
			want: []string{hostUserNS}},
		{name: "extra_files_and_stdin", dir: repo, script: "cat; echo to-fd3 >&3",
			want: []string{"from-stdin"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "node" {
				if _, err := exec.LookPath("node"); err != nil {
					t.Skip("node not installed")
				}
			}
			spec := &Spec{Path: "/bin/sh", Args: []string{"-c", tc.script},
				Env: []string{"PATH=/usr/bin:/bin", "HOME=" + base, "LANG=C.UTF-8", "TMPDIR=/tmp"},
				Dir: tc.dir, UID: nobody, GID: nobody, WritableDirs: []string{tc.dir},
				Session: "tools", Call: fmt.Sprintf("c%d", i)}
			if tc.spec != nil {
				tc.spec(spec)
			}
			var fd3R *os.File
			if tc.name == "extra_files_and_stdin" {
				inR, inW, _ := os.Pipe()
				inW.Write([]byte("from-stdin\n"))
				inW.Close()
				defer inR.Close()
				r, w, _ := os.Pipe()
				fd3R = r
				defer r.Close()
				defer w.Close()
				spec.Stdin, spec.ExtraFiles = inR, []*os.File{w}
			}
			res, out, err := run(t, s, ctxTimeout(t, 20*time.Second), spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q (res %+v):\n%s", w, res, out)
				}
			}
			if fd3R != nil {
				for _, f := range spec.ExtraFiles {
					f.Close()
				}
				b, _ := io.ReadAll(fd3R)
				if !bytes.Contains(b, []byte("to-fd3")) {
					t.Errorf("fd 3 got %q", b)
				}
			}
		})
	}
}
