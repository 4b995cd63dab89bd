package difftest

import (
	"fmt"
	"os"
	"testing"
)

// TestMain: importing sandbox links its C constructor (nsinit.c) into this test binary.
// When the sandbox re-executes the binary as a child's init (argv[1] is the hidden init
// argument, SBX_INIT_ARG), the constructor sets the child up and execs before the Go
// runtime starts, so such a run never gets here; reaching here with that argument means
// the constructor did not run, and running the tests instead would be wrong.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "__sandboxd_init__" {
		fmt.Fprintln(os.Stderr, "difftest: the sandbox init argument reached TestMain")
		os.Exit(2)
	}
	os.Exit(m.Run())
}
