package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
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
