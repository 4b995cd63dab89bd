package sandbox

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	seccomp "github.com/seccomp/libseccomp-golang"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func exportPFC(t *testing.T, f *seccomp.ScmpFilter) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.ExportPFC(w); w.Close() }()
	b, _ := io.ReadAll(r)
	r.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSeccompGolden keeps the exported filter in testdata so a table change shows in review.
// Refresh with: go test ./sandbox -run TestSeccompGolden -args -update
func TestSeccompGolden(t *testing.T) {
	t.Parallel()
	refine, err := refuseIoctls()
	if err != nil {
		t.Fatal(err)
	}
	defer refine.Release()
	main, err := compileSeccomp(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer main.Release()
	last, err := lastFilter(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Release()
	var got bytes.Buffer
	got.WriteString("# filter 1: refuseIoctls (loaded first)\n")
	got.WriteString(exportPFC(t, refine))
	got.WriteString("# filter 2: the allowlist (allowedSyscalls), plus setupSyscalls for the init\n")
	got.WriteString(exportPFC(t, main))
	got.WriteString("# filter 3: lastFilter (loaded just before execve)\n")
	got.WriteString(exportPFC(t, last))
	golden := filepath.Join("testdata", "seccomp.pfc")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if !bytes.Equal(want, got.Bytes()) {
		t.Fatalf("seccomp filter differs from %s; review and rerun with -update", golden)
	}
}

// TestSeccompTable guards the table itself: no forbidden call, no duplicates, extras extend it.
func TestSeccompTable(t *testing.T) {
	t.Parallel()
	forbidden := []string{"ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2",
		"pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick",
		"mount_setattr", "unshare", "setns", "clone3", "bpf", "perf_event_open", "keyctl", "add_key",
		"request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module",
		"delete_module", "userfaultfd", "open_by_handle_at", "name_to_handle_at", "swapon",
		"swapoff", "reboot", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "acct",
		"quotactl", "quotactl_fd", "io_uring_setup", "io_uring_enter", "io_uring_register",
		"personality", "ioctl", "clone", "socket", "chroot", "sethostname", "setdomainname",
		"syslog", "iopl", "ioperm", "lookup_dcookie", "vhangup", "fanotify_init", "io_setup", "link", "linkat"}
	seen := map[string]bool{}
	for _, r := range allowedSyscalls {
		if seen[r.name] {
			t.Errorf("%s listed twice", r.name)
		}
		seen[r.name] = true
	}
	for _, n := range forbidden {
		if seen[n] {
			t.Errorf("%s must not be in the unconditional allowlist", n)
		}
	}
	// An admin addition changes the filter.
	base, err := compileSeccomp(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Release()
	extra, err := compileSeccomp([]string{"vhangup"})
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Release()
	if !strings.Contains(exportPFC(t, extra), "vhangup") || strings.Contains(exportPFC(t, base), "vhangup") {
		t.Error("ExtraSyscalls did not extend the allowlist")
	}
}

// TestSeccompSetupSyscallsOnlyForTheInit: every syscall the allowlist filter lets through for
// the init's setup is one the table itself refuses, and the last filter refuses it again, so
// the user's program meets exactly the table. An admin extra that allows one keeps it allowed.
func TestSeccompSetupSyscallsOnlyForTheInit(t *testing.T) {
	t.Parallel()
	for _, n := range setupSyscalls {
		for _, r := range allowedSyscalls {
			if r.name == n {
				t.Errorf("%s is both in the table and a setup-only syscall", n)
			}
		}
	}
	if got := setupOnly(nil); len(got) != len(setupSyscalls) {
		t.Errorf("setupOnly(nil) = %v, want all of %v", got, setupSyscalls)
	}
	if got := setupOnly([]string{"setns"}); slices.Contains(got, "setns") {
		t.Errorf("an admin extra setns is still refused by the last filter: %v", got)
	}
}

// TestWarnLoosenings: each extra syscall that the table does not allow outright is logged at
// warn level by name, once; an extra the table allows already, or none, logs nothing.
func TestWarnLoosenings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string // nil: no log
	}{
		{"none", nil, nil},
		{"already allowed", []string{"read"}, nil},
		{"one", []string{"vhangup"}, []string{"vhangup"}},
		{"sorted, once, allowed ones left out", []string{"vhangup", "read", "mount", "vhangup"}, []string{"mount", "vhangup"}},
		{"allowed only with argument checks", []string{"clone", "socket"}, []string{"clone", "socket"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zap.DebugLevel)
			warnLoosenings(zap.New(core), tc.extra)
			all := logs.All()
			if tc.want == nil {
				if len(all) != 0 {
					t.Fatalf("logged %v, want nothing", all)
				}
				return
			}
			if len(all) != 1 {
				t.Fatalf("logged %d entries, want 1: %v", len(all), all)
			}
			e := all[0]
			got, _ := e.ContextMap()["syscalls"].([]any)
			gotNames := make([]string, 0, len(got))
			for _, g := range got {
				gotNames = append(gotNames, fmt.Sprint(g))
			}
			if e.Level != zap.WarnLevel || !slices.Equal(gotNames, tc.want) {
				t.Errorf("logged %s %q syscalls=%q, want warn syscalls=%q", e.Level, e.Message, gotNames, tc.want)
			}
		})
	}
}
