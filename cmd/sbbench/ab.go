package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/faults"
	"github.com/sandboxd/sandboxd/protocol"
)

// abDaemon is one side of an A/B comparison: a private daemon, a session on it, and the
// latencies its calls and the bare baseline took in its blocks.
type abDaemon struct {
	name       string
	d          *faults.Daemon
	dir        string
	call       func(int) error
	bare, lats lat
}

// runAB compares two sandboxd builds in one run. Blocks of paced rounds, each round a bare
// fork/exec and a Bash call (the order alternating), go to one daemon at a time, the daemons
// taking turns: the machine's drift falls on both, and neither's clean-up after a call (its
// janitor, its pool's refill, ~3-4.5 ms) lands in the other's calls. Interleaving the two
// daemons' calls 5 ms apart did, and showed the build whose clean-up ran later up to 12% faster.
func runAB(args []string) int {
	fs := flag.NewFlagSet("sbbench ab", flag.ExitOnError)
	binA := fs.String("a", "", "sandboxd binary A (required)")
	binB := fs.String("b", "", "sandboxd binary B (default: bin/sandboxd if present, else a fresh build)")
	blocks := fs.Int("blocks", 10, "blocks per daemon")
	size := fs.Int("block", 20, "measured rounds per block (two more warm each block up)")
	pace := fs.Duration("pace", 5*time.Millisecond, "gap before each command, as in the spawn section")
	command := fs.String("cmd", "/bin/true", "the Bash command each call runs")
	tmp := fs.String("tmp", "/var/tmp", "directory for the daemons' state")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sbbench ab -a OLD [-b NEW] [flags]   two builds' Bash call / bare fork/exec, in alternating blocks\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if *binA == "" || *blocks < 1 || *size < 1 {
		fs.Usage()
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sides := []*abDaemon{{name: "A"}, {name: "B"}}
	defer func() {
		for _, s := range sides {
			if s.d != nil {
				s.d.Close()
				os.RemoveAll(s.dir)
			}
		}
	}()
	for i, bin := range []string{*binA, *binB} {
		if err := sides[i].start(ctx, bin, *tmp, *command); err != nil {
			fmt.Fprintf(os.Stderr, "sbbench ab: daemon %s: %v\n", sides[i].name, err)
			return 1
		}
	}
	bare := func(int) error { return exec.CommandContext(ctx, "/bin/true").Run() }
	for blk := 0; blk < 2**blocks; blk++ {
		s := sides[blk%2]
		l, err := measurePaced(2, *size, *pace, bare, s.call)
		if err != nil {
			fmt.Fprintf(os.Stderr, "sbbench ab: daemon %s: %v\n", s.name, err)
			return 1
		}
		s.bare, s.lats = append(s.bare, l[0]...), append(s.lats, l[1]...)
	}
	ratio := make([]float64, 2)
	for i, s := range sides {
		s.bare, s.lats = s.bare.sorted(), s.lats.sorted()
		ratio[i] = float64(s.lats.q(0.5)) / float64(s.bare.q(0.5))
		fmt.Printf("%s  Bash %q p50 %.2f ms, bare fork/exec p50 %.2f ms: %.2fx   (%s)\n", s.name, *command,
			ms(s.lats.q(0.5)), ms(s.bare.q(0.5)), ratio[i], s.d.Bin)
	}
	fmt.Printf("B/A %.3f   (%d blocks of %d rounds each, calls %v apart)\n", ratio[1]/ratio[0], *blocks, *size, *pace)
	return 0
}

// start runs a private daemon from bin and opens a session on it for command.
func (s *abDaemon) start(ctx context.Context, bin, tmp, command string) error {
	d, dir, err := startDaemon(ctx, bin, tmp, "")
	if err != nil {
		return err
	}
	s.d, s.dir = d, dir
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	c := faults.NewClient(d.Socket, time.Minute)
	sess, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions"})
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.call = func(int) error {
		res, _, err := c.Call(ctx, sess.ID, protocol.CallRequest{Tool: "Bash", Input: faults.Input(map[string]any{"command": command})})
		if err == nil && res.IsError {
			err = fmt.Errorf("the call failed: %v", res.Content)
		}
		return err
	}
	return nil
}
