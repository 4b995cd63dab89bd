// Command sandboxd is the daemon: it takes AI-agent tool calls on a Unix socket, decides
// them by policy and runs the allowed ones confined as the caller.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/internal/gctune"
	"github.com/sandboxd/sandboxd/internal/sdnotify"
	"github.com/sandboxd/sandboxd/worker"
)

func main() {
	// The per-session file-tool worker is this binary re-executed inside the sandbox.
	if worker.IsWorker() {
		worker.Main()
		return
	}
	socket := flag.String("socket", config.DefaultSocket, "Unix socket to serve on (ignored under systemd socket activation)")
	stateDir := flag.String("state-dir", config.DefaultStateDir, "state directory: audit log, persisted results")
	cfgPath := flag.String("config", "", "config file (default "+config.DefaultConfig+" if present)")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()

	lvl, err := zapcore.ParseLevel(*level)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd: --log-level: %v\n", err)
		os.Exit(2)
	}
	log, err := logger(lvl, isTerminal(os.Stderr))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd: logger: %v\n", err)
		os.Exit(1)
	}
	defer log.Sync()

	gctune.Apply() // GOGC and GOMEMLIMIT in the environment win
	// Read before anything can start a child: the notify socket is the daemon's alone.
	notifier, err := sdnotify.FromEnv()
	if err != nil {
		log.Warn("systemd notifications off", zap.Error(err))
	}
	opts := daemon.Options{Socket: *socket, StateDir: *stateDir, ConfigPath: *cfgPath, ConfigRequired: *cfgPath != "",
		Notify: notifier.Notify}
	if opts.ConfigPath == "" {
		opts.ConfigPath = config.DefaultConfig
	}
	if os.Geteuid() != 0 {
		log.Warn("not running as root: children cannot switch to callers' uids or be confined; run as root for production")
	}
	if err := run(opts, log); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxd: %v\n", err)
		os.Exit(1)
	}
}

// logger logs for a person when stderr is a terminal (console lines, colored levels, local
// time) and for a machine otherwise (JSON, which journald and log shippers keep whole).
func logger(lvl zapcore.Level, terminal bool) (*zap.Logger, error) {
	return loggerConfig(lvl, terminal).Build()
}

func loggerConfig(lvl zapcore.Level, terminal bool) zap.Config {
	zcfg := zap.NewProductionConfig()
	zcfg.Level = zap.NewAtomicLevelAt(lvl)
	// An error an operator reads (a refused reload, an unwritable log) is its message, not the
	// daemon's call stack; a recovered panic logs its own stack.
	zcfg.DisableStacktrace = true
	if terminal {
		zcfg.Encoding = "console"
		zcfg.EncoderConfig = zap.NewDevelopmentEncoderConfig()
		zcfg.EncoderConfig.EncodeLevel = zapcore.CapitalColorLevelEncoder
	}
	return zcfg
}

// isTerminal says whether f is a terminal (the TCGETS ioctl answers only for one).
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func run(opts daemon.Options, log *zap.Logger) error {
	d, err := daemon.New(opts, log)
	if err != nil {
		return err
	}
	l, err := daemon.Listen(opts.Socket)
	if err != nil {
		return err
	}
	return d.Serve(context.Background(), l)
}
