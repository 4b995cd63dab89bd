package audit

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// TestCrashKill9 kills a writer process mid-stream several times: after each crash the log
// reopens, Verify passes, and every record whose Append returned nil is present.
func TestCrashKill9(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "audit")
	acked := map[string]bool{}
	for round := range 3 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		// Kill at a different depth each round so rotation, checkpoints and plain appends all
		// get interrupted somewhere.
		killAfter := 500 + 700*round
		n := 0
		deadline := time.Now().Add(20 * time.Second)
		for sc.Scan() {
			acked[sc.Text()] = true
			if n++; n == killAfter || time.Now().After(deadline) {
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		cmd.Wait() // the pipe is drained: every ack written before death was read
		if n < killAfter {
			t.Fatalf("round %d: child died after %d acks", round, n)
		}
		if round == 1 {
			// kill -9 never tears a single write(2) in practice; simulate the power-loss case
			// where only part of the last batch reached the disk.
			files, _ := ListFiles(dir)
			f, err := os.OpenFile(files[len(files)-1], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"v":1,"seq":999999,"time":"2026-01-01T00:00:00Z","kind":"call.st`)
			f.Close()
		}
		l, err := Open(Config{Dir: dir}, zaptest.NewLogger(t))
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		pub := l.PublicKey()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyDir(dir, pub)
		if err != nil {
			t.Fatalf("round %d: verify: %v %+v", round, err, rep)
		}
		t.Logf("round %d: %d acks, %d records, %d files, %d torn tails", round, n, rep.Records, len(rep.Files), rep.TornTails)
	}
	present := map[string]bool{}
	for r, err := range Query(dir, Filter{Kinds: []Kind{KindCallStart}}) {
		if err != nil {
			t.Fatal(err)
		}
		present[r.ToolUseID] = true
	}
	if len(acked) < 3000 {
		t.Fatalf("only %d acks", len(acked))
	}
	for id := range acked {
		if !present[id] {
			t.Fatalf("acknowledged record %s missing after crash", id)
		}
	}
}
