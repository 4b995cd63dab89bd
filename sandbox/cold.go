package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// startCold creates the call's cgroup and re-executes this binary as the call's init.
//
// WARNING: the child must be inside its cgroup before its go-ahead; rerun as root after
// changing: go test -run 'TestEscape|TestInit' ./sandbox/
func (s *Sandbox) startCold(p *Process, blob []byte, netns *os.File, step func(string)) (err error) {
	spec := &p.spec
	// v2 needs the cgroup before the clone (CLONE_INTO_CGROUP). On v1 it is made after the
	// fork, while the child execs and sets itself up: the child waits for the go-ahead before
	// anything of the user's runs, so creating it later costs no confinement, only less time.
	var cg *cgroup
	defer func() {
		if err != nil && cg != nil {
			_ = cg.kill()
			_ = cg.remove()
		}
	}()
	if s.cg.v2 {
		if cg, err = s.newCallCgroup(spec, p.lim); err != nil {
			return err
		}
		p.cg = cg
		step("cgroup_create")
	}

	// The spec travels in a sealed memfd rather than a pipe: no writer goroutine, no pipe
	// size limit, and the child reads a fixed snapshot.
	specFile, err := memfdWith(blob)
	if err != nil {
		return err
	}
	defer specFile.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("error pipe: %w", err)
	}
	defer errR.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		errW.Close()
		return fmt.Errorf("sync pipe: %w", err)
	}
	defer syncW.Close()

	extra := []*os.File{specFile, errW, syncR, netns}
	extra = append(extra, spec.ExtraFiles...)
	cmd := &exec.Cmd{
		Path:        "/proc/self/exe",
		Args:        []string{"sandboxd-init", initArg},
		Env:         []string{},
		Stdin:       spec.Stdin,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		ExtraFiles:  extra,
		SysProcAttr: initAttr(cg),
	}
	step("fds")
	p.start = time.Now()
	err = cmd.Start()
	errW.Close()
	syncR.Close()
	if err != nil {
		return fmt.Errorf("start init: %w", err)
	}
	p.cmd = cmd
	p.mntns = holdMountNS(cmd.Process.Pid)
	step("fork_exec")
	if !s.cg.v2 {
		// v1: the child is blocked on the sync pipe until its pid is in every controller.
		if cg, err = s.newCallCgroup(spec, p.lim); err == nil {
			p.cg = cg
			step("cgroup_create")
			err = cg.addProc(cmd.Process.Pid)
		}
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			releaseMountNS(p.mntns)
			return err
		}
		step("cgroup_attach")
	}
	// A child that failed before the go-ahead has closed its end (EPIPE); its report on the
	// error pipe says why, so read that before giving up.
	_, syncErr := syncW.Write([]byte{0})
	syncW.Close()
	// EOF on the CLOEXEC error pipe: execve succeeded. Anything else is the init's report.
	msg, rerr := io.ReadAll(errR)
	switch {
	case rerr != nil || len(msg) > 0:
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		releaseMountNS(p.mntns)
		if rerr != nil {
			return fmt.Errorf("read init status: %w", rerr)
		}
		return decodeInitError(msg)
	case syncErr != nil:
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		releaseMountNS(p.mntns)
		return fmt.Errorf("release child: %w", syncErr)
	}
	step("child_setup_exec")
	return nil
}

// newCallCgroup creates <root>/user-<uid>/<session>/<call>. A call name may come again once
// its last run ended (a session's restarted worker); that run's cgroup may still be queued for
// the janitor, so on EEXIST the queue is flushed and the create tried once more.
func (s *Sandbox) newCallCgroup(spec *Spec, lim Limits) (*cgroup, error) {
	user, err := s.cg.userDir(spec.tenant())
	if err != nil {
		return nil, err
	}
	parent := filepath.Join(user, spec.Session)
	cg, err := s.cg.newCgroup(parent, spec.Call, lim)
	if errors.Is(err, os.ErrExist) {
		s.janitor.flush()
		cg, err = s.cg.newCgroup(parent, spec.Call, lim)
	}
	return cg, err
}
