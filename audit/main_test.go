package audit

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// crashChildEnv makes the re-executed test binary act as the crash test's writer process.
const crashChildEnv = "SANDBOXD_AUDIT_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		os.Exit(0) // not reached: the parent kills us
	}
	goleak.VerifyTestMain(m)
}

// crashChild appends from many goroutines forever and acknowledges each record on stdout only
// after Append (or AppendWritten) returned nil, so the parent knows exactly which records were
// promised to survive the crash.
func crashChild(dir string) {
	l, err := Open(Config{Dir: dir, MaxFileBytes: 64 << 10, CheckpointEvery: 50}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := strconv.Itoa(os.Getpid()) + "-" + strconv.Itoa(g) + "-" + strconv.Itoa(i)
				r := &Record{Kind: KindCallStart, Tool: "Bash", ToolUseID: id,
					Input: []byte(`{"command":"echo ` + id + `"}`)}
				// Half the writers only wait for the record to be in the file (AppendWritten):
				// a crash of this process must not lose those either.
				appendFn := l.Append
				if g%2 == 1 {
					appendFn = l.AppendWritten
				}
				if err := appendFn(context.Background(), r); err != nil {
					fmt.Fprintln(os.Stderr, "append:", err)
					os.Exit(3)
				}
				mu.Lock()
				os.Stdout.WriteString(id + "\n") // one write(2) per ack: no buffering to lose
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
