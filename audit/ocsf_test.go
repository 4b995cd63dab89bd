package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// ocsfRequired are the attributes OCSF 1.3.0 marks required, by class (the base event's
// and the class's own), and those required inside the objects we fill.
var ocsfRequired = map[int][]string{
	1001: {"activity_id", "actor", "category_uid", "class_uid", "device", "file", "metadata", "severity_id", "time", "type_uid", "file.name", "file.type_id"},
	1007: {"activity_id", "actor", "category_uid", "class_uid", "device", "metadata", "process", "severity_id", "time", "type_uid"},
	4001: {"activity_id", "category_uid", "class_uid", "dst_endpoint", "metadata", "severity_id", "src_endpoint", "time", "type_uid"},
	6003: {"activity_id", "actor", "api", "category_uid", "class_uid", "cloud", "metadata", "severity_id", "src_endpoint", "time", "type_uid", "api.operation", "cloud.provider"},
}

var ocsfMetadataRequired = []string{"metadata.version", "metadata.product", "metadata.product.vendor_name"}

func lookup(ev map[string]any, path string) (any, bool) {
	var cur any = ev
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, cur != nil && cur != ""
}

func TestOCSFRequiredFields(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	bash := callRecord(1)
	read := callRecord(2)
	read.Tool, read.Input = "Read", json.RawMessage(`{"file_path":"/home/u/p/main.go"}`)
	edit := callRecord(3)
	edit.Tool, edit.Input, edit.Decision.Behavior = "Edit", json.RawMessage(`{"file_path":"/home/u/p/.git/config","old_string":"a","new_string":"b"}`), "deny"
	netc := &Record{Kind: KindNetConnect, Session: "s1", Decision: &Decision{Behavior: "deny", Reason: "not allowed"},
		Detail: map[string]string{"host": "paste.example", "port": "443", "ip": "203.0.113.9"}}
	sess := &Record{Kind: KindSessionCreate, Caller: &Caller{UID: 1000, User: "alice"}, Session: "s1", Mode: "default"}
	daemon := &Record{Kind: KindDaemonStart}
	for i, c := range []struct {
		r        *Record
		class    int
		activity int
	}{{bash, 1007, 1}, {read, 1001, 2}, {edit, 1001, 3}, {netc, 4001, 5}, {sess, 6003, 1}, {daemon, 6003, 99}} {
		c.r.Seq, c.r.Time, c.r.V = uint64(i+1), at, Version
		b, err := OCSF(c.r, "host1")
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		if got := int(ev["class_uid"].(float64)); got != c.class {
			t.Errorf("%s %s: class %d, want %d", c.r.Kind, c.r.Tool, got, c.class)
			continue
		}
		if got := int(ev["activity_id"].(float64)); got != c.activity {
			t.Errorf("%s %s: activity %d, want %d", c.r.Kind, c.r.Tool, got, c.activity)
		}
		if got := int(ev["type_uid"].(float64)); got != c.class*100+c.activity {
			t.Errorf("type_uid %d", got)
		}
		for _, f := range append(ocsfRequired[c.class], ocsfMetadataRequired...) {
			if _, ok := lookup(ev, f); !ok {
				t.Errorf("%s %s: OCSF %d lacks required %s: %s", c.r.Kind, c.r.Tool, c.class, f, b)
			}
		}
		if int64(ev["time"].(float64)) != at.UnixMilli() {
			t.Errorf("time %v", ev["time"])
		}
		if seq, _ := lookup(ev, "unmapped.sandboxd.seq"); seq != float64(i+1) {
			t.Errorf("the record is not kept under unmapped.sandboxd: %s", b)
		}
	}
	b, _ := OCSF(edit, "h")
	if !strings.Contains(string(b), `"disposition_id":2`) || !strings.Contains(string(b), `"path":"/home/u/p/.git/config"`) {
		t.Errorf("denied edit: %s", b)
	}
	b, _ = OCSF(bash, "h")
	if !strings.Contains(string(b), `"cmd_line":"curl -H`) {
		t.Errorf("bash: %s", b)
	}
}

func TestSyslogForwardsOCSF(t *testing.T) {
	t.Parallel()
	msg := syslogMessage(t, Config{SyslogOCSF: true}, callRecord(1))
	i := strings.Index(msg, "] {")
	if i < 0 {
		t.Fatalf("no JSON after the header: %s", msg)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(msg[i+2:]), &ev); err != nil {
		t.Fatalf("syslog OCSF body: %v: %s", err, msg)
	}
	if ev["class_uid"] != float64(1007) || ev["metadata"].(map[string]any)["version"] != OCSFVersion {
		t.Errorf("syslog OCSF event: %s", msg[i+2:])
	}
}

// TestOCSFStatusOfTasks: a call past its timeout failed as a call, even when its command went
// on as a background task, and a task's end is a failure unless it completed with exit 0.
func TestOCSFStatusOfTasks(t *testing.T) {
	t.Parallel()
	moved := callRecord(1)
	moved.Outcome = &Outcome{Timeout: true, TaskID: "bash_1"}
	status := func(r *Record) string {
		b, err := OCSF(r, "h")
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		_ = json.Unmarshal(b, &ev)
		s, _ := ev["status"].(string)
		return s
	}
	if s := status(moved); s != "Failure" {
		t.Errorf("a call moved to a task at its timeout: status %q, want Failure", s)
	}
	for detail, want := range map[[2]string]string{
		{"completed", "0"}: "Success", {"completed", "7"}: "Failure", {"killed", "-1"}: "Failure", {"failed", ""}: "Failure",
	} {
		r := &Record{Kind: KindTaskEnd, Session: "s1", Tool: "Bash", Detail: map[string]string{"task_id": "bash_1", "status": detail[0], "exit_code": detail[1]}}
		if s := status(r); s != want {
			t.Errorf("task.end %v: status %q, want %q", detail, s, want)
		}
	}
}

// TestOCSFCallerRunCallsAreNoLaunchSeen: an agent's own report of what it ran (call.report)
// and a decision the caller acts on itself (call.decide) are no process launch sandboxd saw
// succeed: their status is Unknown, so a SIEM filtering on launches does not count them.
func TestOCSFCallerRunCallsAreNoLaunchSeen(t *testing.T) {
	t.Parallel()
	for kind, want := range map[Kind]string{KindCallReport: "Unknown", KindCallDecide: "Unknown", KindCallEnd: "Success"} {
		r := &Record{Kind: kind, Session: "s1", Tool: "Bash", Input: json.RawMessage(`{"command":"sudo shutdown -h now"}`)}
		b, err := OCSF(r, "h")
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		_ = json.Unmarshal(b, &ev)
		if ev["status"] != want || ev["status_id"] != float64(map[string]int{"Unknown": 0, "Success": 1}[want]) {
			t.Errorf("%s: status %v (%v), want %s", kind, ev["status"], ev["status_id"], want)
		}
	}
}
