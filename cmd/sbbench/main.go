package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/internal/gctune"
	"github.com/sandboxd/sandboxd/internal/harness"
)

// sections in the order they run; memory's idle figure is taken before any of them.
var allSections = []string{"decide", "spawn", "read", "grep", "classify", "throughput", "audit", "memory", "egress", "hook"}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "load" {
		return runLoad(args[1:])
	}
	if len(args) > 0 && args[0] == "flood" {
		return runFlood(args[1:])
	}
	if len(args) > 0 && args[0] == "relay" {
		return runRelay(args[1:])
	}
	if len(args) > 0 && args[0] == "ab" {
		return runAB(args[1:])
	}
	// The in-process rows (decisions, classification, the audit log) run the daemon's code, so
	// under the daemon's GC settings; the daemon under test applies them itself.
	defer gctune.Apply()()
	fs := flag.NewFlagSet("sbbench", flag.ExitOnError)
	var o benchOpts
	only := fs.String("only", "", "comma-separated sections to run: "+strings.Join(allSections, ","))
	fs.BoolVar(&o.quick, "quick", false, "fewer iterations and shorter runs (development, CI smoke)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file (\"-\": stdout instead of the table)")
	fs.StringVar(&o.bin, "bin", "", "sandboxd binary (default: bin/sandboxd if present, else built into a temp dir)")
	fs.StringVar(&o.tmp, "tmp", "/var/tmp", "directory for the daemon's state and the audit benchmark; must be on a real disk so fsync costs what it costs")
	fs.StringVar(&o.grepTree, "grep-tree", "/usr/local/go/src", "large tree for the Grep comparison")
	fs.DurationVar(&o.pace, "pace", 5*time.Millisecond, "gap between the paced spawn calls (an agent's are seconds apart; the CPUs idle deeper the longer it is)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sbbench [flags]        benchmark a private sandboxd against same-run baselines\n       sbbench load [flags]   load test with checks (sbbench load -h)\n       sbbench ab -a OLD      two builds' paced Bash calls compared in one run (sbbench ab -h)\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	o.sections = map[string]bool{}
	if *only == "" {
		for _, s := range allSections {
			o.sections[s] = true
		}
	} else {
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			if !contains(allSections, s) {
				fmt.Fprintf(os.Stderr, "sbbench: unknown section %q (have %s)\n", s, strings.Join(allSections, ","))
				return 2
			}
			o.sections[s] = true
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sbbench: %v\n", err)
		return 1
	}
	if *jsonOut == "-" {
		_ = rep.writeJSON(os.Stdout)
	} else {
		rep.print(os.Stdout)
		if *jsonOut != "" {
			f, err := os.Create(*jsonOut)
			if err != nil {
				fmt.Fprintf(os.Stderr, "sbbench: %v\n", err)
				return 1
			}
			err = rep.writeJSON(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sbbench: write json: %v\n", err)
				return 1
			}
		}
	}
	if len(rep.Errors) > 0 {
		return 1
	}
	return 0
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// daemonBinary is the binary to benchmark: the flag, bin/sandboxd as `make bench` builds it,
// or a fresh build into dir (the run's own directory: two runs never share a build).
func daemonBinary(ctx context.Context, flagBin, dir string) (string, error) {
	if flagBin != "" {
		return filepath.Abs(flagBin)
	}
	if root, err := harness.ModuleRoot(ctx); err == nil {
		p := filepath.Join(root, "bin", "sandboxd")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	fmt.Fprintln(os.Stderr, "sbbench: building sandboxd ...")
	return harness.Build(ctx, dir)
}

// startDaemon starts a private daemon (never the system one) from the --bin binary or a fresh
// build, in a new directory under tmp; the caller removes the dir and closes the daemon.
// startDaemon starts a daemon on harness.DefaultConfig plus extraYAML (top-level keys).
func startDaemon(ctx context.Context, flagBin, tmp, extraYAML string) (*harness.Daemon, string, error) {
	if os.Geteuid() != 0 {
		return nil, "", fmt.Errorf("sbbench needs root: the daemon confines children with cgroups and namespaces (run as root: sudo make bench, or sudo make test)")
	}
	dir, err := os.MkdirTemp(tmp, "sbbench-")
	if err != nil {
		return nil, "", err
	}
	bin, err := daemonBinary(ctx, flagBin, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	d, err := harness.Start(ctx, harness.Options{Bin: bin, Dir: dir, ConfigYAML: harness.DefaultConfig(dir) + extraYAML})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", err
	}
	return d, dir, nil
}
