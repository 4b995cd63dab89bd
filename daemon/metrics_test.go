package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox"
)

// Every call's waits on the audit log show in /v1/metrics by wait level: a Read's start is
// queued and its end written; a Write's are durable.
func TestAuditWaitMetric(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, `{"cwd":"/var/tmp","mode":"acceptEdits"}`)
	f := filepath.Join(s.Cwd, "sandboxd-metric-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.Remove(f) })
	if code, res := td.call(t, s.ID, "Write", fmt.Sprintf(`{"file_path":%q,"content":"x"}`, f)); code != 200 || res.IsError {
		t.Fatalf("write: %d %+v", code, res)
	}
	if code, res := td.call(t, s.ID, "Read", fmt.Sprintf(`{"file_path":%q}`, f)); code != 200 || res.IsError {
		t.Fatalf("read: %d %+v", code, res)
	}
	code, b := td.do(t, "GET", "/v1/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, b)
	}
	for _, level := range []string{"queued", "written", "durable"} {
		re := regexp.MustCompile(`(?m)^sandboxd_audit_wait_seconds_count\{wait="` + level + `"\} ([0-9]+)$`)
		m := re.FindSubmatch(b)
		if m == nil || string(m[1]) == "0" {
			t.Errorf("no %s audit wait counted:\n%s", level, b)
		}
	}
}

// Where a call's time goes shows in /v1/metrics: every pipeline step of a Bash call, and the
// steps of its confined start and end.
func TestStepTimeMetrics(t *testing.T) {
	td := startDaemon(t, "")
	s := td.newSession(t, `{"cwd":"/var/tmp","mode":"bypassPermissions"}`)
	if code, res := td.call(t, s.ID, "Bash", `{"command":"/bin/true"}`); code != 200 || res.IsError {
		t.Fatalf("bash: %d %+v", code, res)
	}
	code, b := td.do(t, "GET", "/v1/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, b)
	}
	for _, m := range []string{
		`sandboxd_call_stage_seconds_count{stage="permission"}`, `sandboxd_call_stage_seconds_count{stage="execute"}`,
		`sandboxd_call_stage_seconds_count{stage="finish"}`, `sandboxd_spawn_step_seconds_count{step="plan"}`,
		`sandboxd_spawn_step_seconds_count{step="child_setup_exec"}`, `sandboxd_spawn_step_seconds_count{step="cgroup_stats"}`,
	} {
		re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m) + ` ([0-9]+)$`)
		if got := re.FindSubmatch(b); got == nil || string(got[1]) == "0" {
			t.Errorf("%s not counted:\n%s", m, b)
		}
	}
}

// TestSetupClassesCoverTheChild: every step the confined child reports a failure at
// (sbx_fail's second argument in sandbox/nsinit*.c) has its own class, so no failure the
// child can name is counted as "other".
func TestSetupClassesCoverTheChild(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../sandbox/nsinit*.c")
	if err != nil || len(files) == 0 {
		t.Fatalf("no child sources: %v", err)
	}
	call := regexp.MustCompile(`sbx_fail\([^,]+,\s*"([^"]+)"`)
	seen := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			seen++
			step, _, _ := strings.Cut(m[1], " ")
			if !setupClasses[step] {
				t.Errorf("%s: the child fails at %q, which setupClasses counts as other", filepath.Base(f), m[1])
			}
			if got := setupClass(&sandbox.InitError{Step: m[1]}); got != step {
				t.Errorf("setupClass(%q) = %q, want %q", m[1], got, step)
			}
		}
	}
	if seen < 20 {
		t.Errorf("found %d sbx_fail calls; the pattern no longer matches the sources", seen)
	}
}
