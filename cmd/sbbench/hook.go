package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"mvdan.cc/sh/v3/shell"

	"github.com/sandboxd/sandboxd/internal/harness"
)

// hook measures what an agent configured with `sbctl hook --confine` pays on every tool call:
// the hook's round trip, and a Bash call it rewrote, run as the agent's shell runs it. Each
// round runs every step once, in an order rotated each round, beside a bare fork/exec of
// /bin/true, so the machine's drift lands on every row alike.
func (e *env) hook(ctx context.Context) error {
	const sec = "agent hook (sbctl hook --confine)"
	n := e.o.pick(100, 20)
	dir := filepath.Dir(e.work)
	sbctl, err := sbctlBinary(ctx, e.o.bin, dir)
	if err != nil {
		return err
	}
	rt := filepath.Join(dir, "hook-runtime")
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return err
	}
	in, err := json.Marshal(map[string]any{"session_id": "sbbench", "cwd": e.work, "hook_event_name": "PreToolUse",
		"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "/bin/true"}})
	if err != nil {
		return err
	}
	env := []string{"PATH=/usr/bin:/bin", "XDG_RUNTIME_DIR=" + rt, "HOME=" + rt}
	run := func(stdin []byte, name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %s", filepath.Base(name), err, stderr.Bytes())
		}
		return out, nil
	}
	hook := func(confine bool) (string, error) {
		args := []string{"--socket", e.d.Socket, "hook"}
		if confine {
			args = append(args, "--confine")
		}
		out, err := run(in, sbctl, args...)
		if err != nil || !confine {
			return "", err
		}
		var a struct {
			HookSpecificOutput struct {
				PermissionDecision string         `json:"permissionDecision"`
				UpdatedInput       map[string]any `json:"updatedInput"`
			} `json:"hookSpecificOutput"`
		}
		if err := json.Unmarshal(out, &a); err != nil || a.HookSpecificOutput.PermissionDecision != "allow" {
			return "", fmt.Errorf("sbctl hook --confine said %s (%v)", out, err)
		}
		rewrite, _ := a.HookSpecificOutput.UpdatedInput["command"].(string)
		if rewrite == "" {
			return "", fmt.Errorf("sbctl hook --confine rewrote nothing: %s", out)
		}
		return rewrite, nil
	}
	// The hook's part of a rewrite's step runs before its timing starts.
	var bare, hk, viaBash, direct, e2e lat
	timed := func(l *lat, f func() error) error {
		t := time.Now()
		if err := f(); err != nil {
			return err
		}
		*l = append(*l, time.Since(t))
		return nil
	}
	steps := []func() error{
		func() error { return timed(&bare, func() error { _, err := run(nil, "/bin/true"); return err }) },
		func() error { return timed(&hk, func() error { _, err := hook(false); return err }) },
		func() error {
			rewrite, err := hook(true)
			if err != nil {
				return err
			}
			return timed(&viaBash, func() error { _, err := run(nil, "bash", "-c", rewrite); return err })
		},
		func() error {
			rewrite, err := hook(true)
			if err != nil {
				return err
			}
			argv, err := shell.Fields(rewrite, func(string) string { return "" })
			if err != nil || len(argv) == 0 {
				return fmt.Errorf("split the rewrite %q: %v", rewrite, err)
			}
			return timed(&direct, func() error { _, err := run(nil, argv[0], argv[1:]...); return err })
		},
		func() error {
			return timed(&e2e, func() error {
				rewrite, err := hook(true)
				if err != nil {
					return err
				}
				_, err = run(nil, "bash", "-c", rewrite)
				return err
			})
		},
	}
	const warm = 5
	for i := 0; i < warm+n; i++ {
		if i == warm {
			bare, hk, viaBash, direct, e2e = nil, nil, nil, nil, nil
		}
		for k := range steps {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(e.o.pace) // an agent's calls come seconds apart, not back to back
			if err := steps[(i+k)%len(steps)](); err != nil {
				return err
			}
		}
	}
	base := ms(bare.sorted().q(0.5))
	add := func(name string, l lat, note string) {
		e.rep.add(Row{Section: sec, Name: name, Value: ms(l.sorted().q(0.5)), Unit: "ms",
			Baseline: base, BaselineName: "bare fork/exec /bin/true", Note: note})
	}
	add("`sbctl hook` round trip, process start to JSON out, p50", hk, "goal <= 4x")
	add("a `--confine`d `/bin/true` end to end: the hook, then `bash -c` of its rewrite, p50", e2e, "goal <= 6x")
	add("the rewrite alone, run by `bash -c` as the agent's shell runs it, p50", viaBash, "bash's start, sbctl's, the confined call")
	add("the rewrite's `sbctl bash` alone, exec'd without a shell, p50", direct, "sbctl's start and the confined call: what `codex sandbox -- /bin/true` is to Codex")
	return nil
}

// sbctlBinary is the client to measure: beside --bin's daemon, else bin/sbctl as `make bench`
// builds it, else a fresh build into dir.
func sbctlBinary(ctx context.Context, flagBin, dir string) (string, error) {
	var candidates []string
	if flagBin != "" {
		candidates = append(candidates, filepath.Join(filepath.Dir(flagBin), "sbctl"))
	} else if root, err := harness.ModuleRoot(ctx); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "sbctl"))
	}
	for _, p := range candidates {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return filepath.Abs(p)
		}
	}
	fmt.Fprintln(os.Stderr, "sbbench: building sbctl ...")
	return harness.BuildCommand(ctx, dir, "sbctl")
}
