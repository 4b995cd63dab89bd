package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BenchmarkSpawn compares, in one run, a bare fork/exec of /bin/true, the confined spawn
// (cgroup, namespaces, mounts, landlock, seccomp, Start+Wait) and bwrap with comparable flags.
// Ratios: go test -run '^$' -bench Spawn -benchtime 200x ./sandbox/
func BenchmarkSpawn(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// confined: the per-call path (no pool), as before the pool.
	b.Run("confined", func(b *testing.B) { benchConfined(b, false, "") })
	// pooled: a call handed to a ready pooled init; the wait for the refill is not timed.
	b.Run("pooled", func(b *testing.B) { benchConfined(b, true, "") })
	// pooled_repo: the same in a git repository with its protected paths (config, hooks,
	// info/attributes) made read-only: the cost of the extra mounts, beside pooled.
	b.Run("pooled_repo", func(b *testing.B) { benchConfined(b, true, "repo") })
	// pooled_home: the same in a project inside a home, with the configuration's default
	// deny paths, most of them missing: the landlock rules around them, as most calls have.
	b.Run("pooled_home", func(b *testing.B) { benchConfined(b, true, "home") })
	b.Run("bwrap", func(b *testing.B) {
		bw, err := exec.LookPath("bwrap")
		if err != nil {
			b.Skip("bwrap not installed")
		}
		dir := b.TempDir()
		for i := 0; i < b.N; i++ {
			cmd := exec.Command(bw, "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--bind", dir, dir, "--dev", "/dev",
				"--proc", "/proc", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
				"--unshare-net", "--unshare-user", "--uid", "65534", "--gid", "65534", "--new-session", "--die-with-parent", "--cap-drop", "ALL",
				"--clearenv", "--chdir", dir, "/bin/true")
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatal(err, string(out))
			}
		}
	})
}

// benchConfined times Start and Wait of /bin/true in a dir of shape "" (empty), "repo" or
// "home" (benchHome).
func benchConfined(b *testing.B, pooled bool, shape string) {
	s := newTestSandbox(b, Config{})
	s.noPool.Store(!pooled)
	dir := b.TempDir()
	var protected, deny []string
	if shape == "home" {
		dir, deny = benchHome(b)
	}
	if shape == "repo" {
		for _, p := range []string{".git/hooks", ".git/info"} {
			os.MkdirAll(filepath.Join(dir, p), 0o755)
		}
		for _, p := range []string{".git/config", ".git/info/attributes", ".git/hooks/pre-commit"} {
			os.WriteFile(filepath.Join(dir, p), []byte("x\n"), 0o644)
		}
		protected = ProtectedCandidates([]string{dir}, dir, "")
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, nobody, nobody) })
	}
	os.Chown(dir, nobody, nobody)
	// The caller must reach it on the host, as a session's dir: the plan looks as the caller,
	// and a dir it cannot reach gets no mount.
	os.Chmod(filepath.Dir(dir), 0o755)
	ctx := ctxTimeout(b, time.Hour)
	steps := map[string]time.Duration{}
	var order []string
	s.stepDone = func(step string, d time.Duration) {
		if _, ok := steps[step]; !ok {
			order = append(order, step)
		}
		steps[step] += d
	}
	prebuilt := 0 // calls whose pooled init had prebuilt their landlock base
	defer func() {
		for _, st := range order {
			b.ReportMetric(float64(steps[st].Microseconds())/float64(b.N), st+"_µs/op")
		}
		if pooled {
			b.ReportMetric(float64(prebuilt)/float64(b.N), "prebuilt/op")
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if pooled {
			b.StopTimer()
			waitPoolReady(b, s, poolMin)
			b.StartTimer()
		}
		p, err := s.Start(ctx, &Spec{Path: "/bin/true", Dir: dir, WritableDirs: []string{dir}, ProtectedPaths: protected,
			DenyPaths: deny, Env: []string{"PATH=/usr/bin:/bin"}, UID: nobody, GID: nobody,
			Session: "bench", Call: fmt.Sprintf("c%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		if p.pooled != pooled {
			b.Fatalf("pooled = %v, want %v", p.pooled, pooled)
		}
		if p.llPrebuilt {
			prebuilt++
		}
		res, err := p.Wait()
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

// benchHome makes a home of nobody's under /var/tmp (not /tmp: a call's /tmp is its own), as a
// developer's looks (a couple of dozen entries, ~/.ssh among them), and returns a project dir in
// it and the configuration's default deny paths there (config.Defaults), of which only ~/.ssh
// exists: landlock keeps the others unreadable should they appear.
func benchHome(b *testing.B) (work string, deny []string) {
	home := hostTempDir(b, "/var/tmp", "sbx-benchhome-")
	os.Chmod(home, 0o755)
	for _, d := range []string{".cache", ".config/git", ".config/htop", ".config/nvim", ".config/go", ".local/bin",
		".ssh", ".npm", ".cargo", ".docker", ".vim", "go/pkg", "src/other", "work", "Documents", "Downloads"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	for _, f := range []string{".bashrc", ".profile", ".bash_history", ".bash_logout", ".gitconfig", ".viminfo",
		".lesshst", ".python_history", ".wget-hsts", ".ssh/id_ed25519", ".ssh/known_hosts", "work/main.go"} {
		os.WriteFile(filepath.Join(home, f), []byte("x\n"), 0o644)
	}
	filepath.Walk(home, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, nobody, nobody) })
	for _, p := range []string{".ssh", ".aws", ".gnupg", ".config/gcloud", ".azure", ".kube", ".docker/config.json", ".netrc"} {
		deny = append(deny, filepath.Join(home, p))
	}
	return filepath.Join(home, "work"), append(deny, "/var/run/docker.sock", "/run/docker.sock")
}

// BenchmarkPlan is the daemon's share of a call's setup before the hand-over: resolving the
// session's dirs, the default deny paths of a home and the protected paths (as the caller), the
// mount plan and the landlock rules (their expansion cached). go test -run '^$' -bench Plan ./sandbox/
func BenchmarkPlan(b *testing.B) {
	s, spec := benchPlanSpec(b)
	planOf(b, s, spec) // the expansion cache and the session's netns, as a session's later calls find them
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		planOf(b, s, spec)
	}
}

// BenchmarkSweep is the look for protected paths a call made, which the result waits for once
// the call's processes are gone: every missing one of BenchmarkPlan's candidates, none made.
// go test -run '^$' -bench Sweep ./sandbox/
func BenchmarkSweep(b *testing.B) {
	s, spec := benchPlanSpec(b)
	p := plannedProcess(b, s, spec)
	if len(p.guard) == 0 {
		b.Fatal("the plan guards nothing")
	}
	b.ReportMetric(float64(len(p.guard)), "guarded")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.moveAsideCreated(false)
	}
	if len(p.moved) != 0 {
		b.Fatalf("moved aside %v, which nothing made", p.moved)
	}
}

// benchPlanSpec is a call's spec in a project inside a home of nobody's, with the default deny
// paths of the configuration and the protected paths the daemon gives a session there.
// plannedProcess is a Process of spec planned as a call's is, with no child: its sweeps can be
// run by hand (moveAsideCreated). Its covers are released when tb ends.
func plannedProcess(tb testing.TB, s *Sandbox, spec Spec) *Process {
	tb.Helper()
	p := &Process{s: s, spec: spec, start: time.Now()}
	p.lim = p.spec.Limits.merge(s.limits)
	if _, netns, err := s.plan(p); err != nil {
		tb.Fatal(err)
	} else if netns != nil {
		netns.Close()
	}
	s.guarding.done(p) // no call runs: Wait's part
	tb.Cleanup(p.unpinCovers)
	return p
}

func benchPlanSpec(b *testing.B) (*Sandbox, Spec) {
	s := newTestSandbox(b, Config{})
	home := hostTempDir(b, "/var/tmp", "sbx-benchplan-")
	work := home + "/work"
	for _, d := range []string{work, home + "/.ssh", home + "/.cache/go-build"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, d := range []string{home, work, home + "/.ssh", home + "/.cache", home + "/.cache/go-build"} {
		os.Chown(d, nobody, nobody)
	}
	os.Chmod(home, 0o755)
	// A new account's start-up files, which the plan reads for what they source or put on PATH.
	for _, f := range []string{".bashrc", ".profile", ".bash_logout"} {
		if src, err := os.ReadFile(filepath.Join("/etc/skel", f)); err == nil {
			os.WriteFile(filepath.Join(home, f), src, 0o644)
		}
	}
	var deny []string
	for _, p := range []string{"/.ssh", "/.aws", "/.gnupg", "/.config/gcloud", "/.azure", "/.kube", "/.docker/config.json", "/.netrc"} {
		deny = append(deny, home+p)
	}
	deny = append(deny, "/var/run/docker.sock", "/run/docker.sock")
	results := hostTempDir(b, "/var/tmp", "sbx-benchresults-") // the daemon's, as a session's tool-results dir
	os.Chmod(results, 0o755)
	writable := []string{work, home + "/.cache/go-build"}
	return s, Spec{Path: "/bin/true", Dir: work, WritableDirs: writable, Env: []string{"HOME=" + home},
		ReadOnlyDirs: []string{results}, DenyPaths: deny, UID: nobody, GID: nobody, Session: "bp", Call: "c",
		ProtectedPaths: ProtectedCandidates(writable, work, home), ProtectedPatterns: ProtectedPatterns(writable, work),
		MoveAsideCreated: true}
}

// BenchmarkPatternWalk is a walk of 4 000 entries for 200 rules each naming a file at any depth
// (Read(.env)-like) and one with a wildcard name, as every call of such a session walks.
// go test -run '^$' -bench PatternWalk ./sandbox/
func BenchmarkPatternWalk(b *testing.B) {
	base := hostTempDir(b, "/var/tmp", "sbx-benchwalk-")
	for i := 0; i < 400; i++ {
		d := filepath.Join(base, fmt.Sprintf("d%d", i))
		os.MkdirAll(d, 0o755)
		for j := 0; j < 9; j++ {
			os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", j)), nil, 0o644)
		}
	}
	var pats []string
	for i := 0; i < 200; i++ {
		pats = append(pats, escapePattern(base)+fmt.Sprintf("/**/.secret%d", i))
	}
	pats = append(pats, escapePattern(base)+"/**/*.key")
	runtime.LockOSThread() // the walk's CPU bound reads the thread's clock, as asCaller's
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := expandPatterns(newFSView(), pats, []string{base}, 0, patternWalk{}); err != nil {
			b.Fatal(err)
		}
	}
}
