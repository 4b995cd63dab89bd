package procs

import (
	"os"
	"runtime"
	"sync"
	"testing"
)

// enableForTest turns the governor on for one test, or skips where it cannot narrow anything.
func enableForTest(t *testing.T) (wide int) {
	t.Helper()
	if os.Getenv("GOMAXPROCS") != "" {
		t.Skip("GOMAXPROCS is set in the environment: Enable leaves it alone by design")
	}
	wide = runtime.GOMAXPROCS(0)
	if wide <= 1 {
		t.Skip("the runtime's default is one P here: there is nothing to narrow")
	}
	if !Enable() {
		t.Fatal("Enable refused with a default of", wide)
	}
	t.Cleanup(Disable)
	return wide
}

func TestNarrowUntilParallel(t *testing.T) {
	wide := enableForTest(t)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after Enable GOMAXPROCS = %d, want 1", got)
	}
	outer := Parallel()
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("holding Parallel GOMAXPROCS = %d, want the default %d", got, wide)
	}
	inner := Parallel()
	outer()
	outer() // a second release of the same hold changes nothing
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("with one of two holds left GOMAXPROCS = %d, want %d", got, wide)
	}
	inner()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after the last release GOMAXPROCS = %d, want 1", got)
	}
	Disable()
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("after Disable GOMAXPROCS = %d, want the default %d", got, wide)
	}
}

func TestParallelWithoutEnableChangesNothing(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	release := Parallel()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("Parallel without Enable set GOMAXPROCS to %d (was %d)", got, before)
	}
	release()
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("its release set GOMAXPROCS to %d (was %d)", got, before)
	}
}

// A hold taken before Enable still counts: Enable must not narrow under it.
func TestEnableUnderAHold(t *testing.T) {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) <= 1 {
		t.Skip("nothing to narrow here (GOMAXPROCS set, or a default of one P)")
	}
	wide := runtime.GOMAXPROCS(0)
	release := Parallel()
	enableForTest(t)
	if got := runtime.GOMAXPROCS(0); got != wide {
		t.Fatalf("Enable under a hold set GOMAXPROCS to %d, want %d", got, wide)
	}
	release()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("after the hold GOMAXPROCS = %d, want 1", got)
	}
}

func TestConcurrentHoldsEndNarrow(t *testing.T) {
	enableForTest(t)
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				Parallel()()
			}
		}()
	}
	wg.Wait()
	if got, h := runtime.GOMAXPROCS(0), Holds(); got != 1 || h != 0 {
		t.Fatalf("after every hold ended: GOMAXPROCS = %d, holds = %d; want 1 and 0", got, h)
	}
}
