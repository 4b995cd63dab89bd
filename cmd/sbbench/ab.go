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

	"github.com/sandboxd/sandboxd/internal/harness"
	"github.com/sandboxd/sandboxd/protocol"
)

// abDaemon is one side of an A/B comparison: a private daemon, sessions on it, and the
// latencies its calls and the bare baseline took in its blocks (with -clients, their rates).
type abDaemon struct {
	name       string
	d          *harness.Daemon
	dir        string
	call       func(w int) error
	file       string // with -tool read: the 4 KB file its calls read
	bare, lats lat
	// bareRate and rate sum the blocks' calls/s at -clients.
	bareRate, rate float64
}

// runAB compares two sandboxd builds in one run. Blocks of paced rounds, each round a bare
// fork/exec and a Bash call (the order alternating), go to one daemon at a time, the daemons
// taking turns: the machine's drift falls on both, and neither's clean-up after a call (its
// janitor, its pool's refill, ~3-4.5 ms) lands in the other's calls. Interleaving the two
// daemons' calls 5 ms apart did, and showed the build whose clean-up ran later up to 12% faster.
// With -clients N each block is instead N clients calling back to back for -dur, beside N
// bare fork/execs for half as long: the throughput rows (and, at 1, calls without a pause), in
// the same alternation.
func runAB(args []string) int {
	fs := flag.NewFlagSet("sbbench ab", flag.ExitOnError)
	binA := fs.String("a", "", "sandboxd binary A (required)")
	binB := fs.String("b", "", "sandboxd binary B (default: bin/sandboxd if present, else a fresh build)")
	blocks := fs.Int("blocks", 10, "blocks per daemon")
	size := fs.Int("block", 20, "measured rounds per block (two more warm each block up)")
	pace := fs.Duration("pace", 5*time.Millisecond, "gap before each command, as in the spawn section")
	command := fs.String("cmd", "/bin/true", "the Bash command each call runs")
	tmp := fs.String("tmp", "/var/tmp", "directory for the daemons' state")
	clients := fs.Int("clients", 0, "clients calling back to back, concurrently (0: paced single calls)")
	dur := fs.Duration("dur", 2*time.Second, "with -clients: how long each block's clients call")
	tool := fs.String("tool", "bash", "each call: bash (Bash -cmd), read (Read of a 4 KB file, against os.ReadFile) or loop (an agent's round: Grep, Read, Edit, then Bash -cmd, in one session)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: sbbench ab -a OLD [-b NEW] [flags]   two builds' Bash call / bare fork/exec (or, with -clients, calls/s), in alternating blocks\n\n")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if *binA == "" || *blocks < 1 || *size < 1 || *clients < 0 || (*tool != "bash" && *tool != "read" && *tool != "loop") {
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
	// At most 8 sessions, so the figure is the daemon's, not that many workers starting up; a
	// loop's Edits need one session each.
	nsess := min(max(*clients, 1), 8)
	if *tool == "loop" {
		nsess = max(*clients, 1)
	}
	for i, bin := range []string{*binA, *binB} {
		if err := sides[i].start(ctx, bin, *tmp, *command, *tool, nsess); err != nil {
			fmt.Fprintf(os.Stderr, "sbbench ab: daemon %s: %v\n", sides[i].name, err)
			return 1
		}
	}
	bare := func(int) error { return exec.CommandContext(ctx, "/bin/true").Run() }
	what, baseName := fmt.Sprintf("Bash %q", *command), "bare fork/exec"
	switch *tool {
	case "read":
		bare = func(int) error { _, err := os.ReadFile(sides[0].file); return err }
		what, baseName = "Read 4 KB", "os.ReadFile"
	case "loop":
		what = fmt.Sprintf("Grep, Read, Edit, Bash %q", *command)
	}
	if *clients > 0 {
		return abThroughput(ctx, sides, *blocks, *clients, *dur, what, baseName, bare)
	}
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
		fmt.Printf("%s  %s p50 %.3f ms, %s p50 %.3f ms: %.2fx   (%s)\n", s.name, what,
			ms(s.lats.q(0.5)), baseName, ms(s.bare.q(0.5)), ratio[i], s.d.Bin)
	}
	fmt.Printf("B/A %.3f   (%d blocks of %d rounds each, calls %v apart)\n", ratio[1]/ratio[0], *blocks, *size, *pace)
	return 0
}

// abThroughput runs the -clients comparison: per block, bare fork/exec then the daemon's
// calls, each at the same concurrency; the ratio is the daemon's calls/s over bare's.
func abThroughput(ctx context.Context, sides []*abDaemon, blocks, clients int, dur time.Duration, what, baseName string, bare func(int) error) int {
	for blk := 0; blk < 2*blocks; blk++ {
		s := sides[blk%2]
		bRate, _, err := load(ctx, clients, dur/2, bare)
		if err == nil {
			var rate float64
			rate, _, err = load(ctx, clients, dur, s.call)
			s.bareRate, s.rate = s.bareRate+bRate, s.rate+rate
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "sbbench ab: daemon %s: %v\n", s.name, err)
			return 1
		}
	}
	ratio := make([]float64, 2)
	for i, s := range sides {
		ratio[i] = s.rate / s.bareRate
		fmt.Printf("%s  %s %.0f calls/s at %d clients, %s %.0f/s: %.3fx   (%s)\n", s.name, what,
			s.rate/float64(blocks), clients, baseName, s.bareRate/float64(blocks), ratio[i], s.d.Bin)
	}
	fmt.Printf("B/A %.3f calls/s   (%d blocks of %v each, %d clients)\n", ratio[1]/ratio[0], blocks, dur, clients)
	return 0
}

// start runs a private daemon from bin and opens nsess sessions on it; call(w) makes tool's
// call (or calls) in session w mod nsess.
func (s *abDaemon) start(ctx context.Context, bin, tmp, command, tool string, nsess int) error {
	d, dir, err := startDaemon(ctx, bin, tmp, "")
	if err != nil {
		return err
	}
	s.d, s.dir = d, dir
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		return err
	}
	s.file = filepath.Join(work, "file4k.txt")
	if err := os.WriteFile(s.file, fileOf(4096), 0o644); err != nil {
		return err
	}
	c := d.Client(time.Minute)
	ids := make([]string, nsess)
	for i := range ids {
		sess, err := c.CreateSession(ctx, protocol.CreateSession{Cwd: work, Mode: "bypassPermissions"})
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		ids[i] = sess.ID
	}
	do := func(sid, tool string, in map[string]any) error {
		res, err := c.Call(ctx, sid, protocol.CallRequest{Tool: tool, Input: harness.Input(in)})
		if err == nil && res.IsError {
			err = fmt.Errorf("the %s call failed: %v", tool, res.Content)
		}
		return err
	}
	switch tool {
	case "bash":
		s.call = func(w int) error { return do(ids[w%nsess], "Bash", map[string]any{"command": command}) }
	case "read":
		s.call = func(w int) error { return do(ids[w%nsess], "Read", map[string]any{"file_path": s.file}) }
	case "loop":
		// Each session edits a file of its own, one counter further each round.
		files, counters := make([]string, nsess), make([]int, nsess)
		for k := range files {
			files[k] = filepath.Join(work, fmt.Sprintf("loop%d.txt", k))
			if err := os.WriteFile(files[k], append([]byte("counter=0\n"), fileOf(4096)...), 0o644); err != nil {
				return err
			}
		}
		s.call = func(w int) error {
			k := w % nsess
			err := do(ids[k], "Grep", map[string]any{"pattern": "counter=[0-9]+", "path": work})
			if err == nil {
				err = do(ids[k], "Read", map[string]any{"file_path": files[k]})
			}
			if err == nil {
				err = do(ids[k], "Edit", map[string]any{"file_path": files[k],
					"old_string": fmt.Sprintf("counter=%d\n", counters[k]), "new_string": fmt.Sprintf("counter=%d\n", counters[k]+1)})
			}
			if err == nil {
				counters[k]++
				err = do(ids[k], "Bash", map[string]any{"command": command})
			}
			return err
		}
	}
	// Each session's worker starts outside the measurement.
	for w := range ids {
		if err := s.call(w); err != nil {
			return err
		}
	}
	return nil
}
