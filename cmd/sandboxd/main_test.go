package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/config"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pts: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

func TestIsTerminal(t *testing.T) {
	_, pts := openPTY(t)
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	pipeR, pipeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pipeR.Close()
	defer pipeW.Close()
	tests := []struct {
		name string
		f    *os.File
		want bool
	}{
		{"pty", pts, true},
		{"/dev/null", devnull, false},
		{"pipe", pipeW, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := isTerminal(tc.f); got != tc.want {
				t.Fatalf("isTerminal(%s) = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
}

// On a terminal a person reads the log; anywhere else (journald, a file, a pipe) each line is
// one JSON object a machine can parse.
func TestLoggerFormat(t *testing.T) {
	tests := []struct {
		name     string
		terminal bool
		check    func(line string) error
	}{
		{"terminal", true, func(line string) error {
			if strings.HasPrefix(line, "{") || !strings.Contains(line, "INFO") || !strings.Contains(line, `{"tool": "Bash"}`) {
				return fmt.Errorf("not a console line: %q", line)
			}
			return nil
		}},
		{"not a terminal", false, func(line string) error {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				return fmt.Errorf("not JSON: %q: %w", line, err)
			}
			if m["msg"] != "hello" || m["tool"] != "Bash" || m["level"] != "info" {
				return fmt.Errorf("fields: %v", m)
			}
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "log")
			cfg := loggerConfig(zapcore.InfoLevel, tc.terminal)
			cfg.OutputPaths, cfg.ErrorOutputPaths = []string{out}, []string{out}
			log, err := cfg.Build()
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello", zap.String("tool", "Bash"))
			log.Debug("not at info")
			_ = log.Sync()
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != 1 {
				t.Fatalf("want one line at info, got %q", b)
			}
			if err := tc.check(lines[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The example /etc/sandboxd/sandboxd.yaml loads and is exactly the built-in defaults: it
// documents them and changes nothing until an admin edits it.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	got, err := config.Load(filepath.Join("..", "..", "systemd", "sandboxd.yaml"), true)
	if err != nil {
		t.Fatalf("load the example: %v", err)
	}
	want := config.Default()
	gb, _ := json.MarshalIndent(got, "", " ")
	wb, _ := json.MarshalIndent(want, "", " ")
	if string(gb) != string(wb) {
		t.Fatalf("the example differs from config.Default():\nexample: %s\ndefault: %s", gb, wb)
	}
}
