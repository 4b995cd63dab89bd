package audit

import (
	"encoding/json"
	"strconv"
	"strings"
)

// OCSFVersion is the OCSF schema version Export's ocsf format writes.
const OCSFVersion = "1.3.0"

// The OCSF classes the records map onto (docs/audit.md has the field mapping).
const (
	ocsfFileSystem = 1001 // File System Activity: Read, Write, Edit, MultiEdit, Glob, Grep
	ocsfProcess    = 1007 // Process Activity: Bash
	ocsfNetwork    = 4001 // Network Activity: net.connect
	ocsfAPI        = 6003 // API Activity: everything else
)

var ocsfClass = map[int][2]string{
	ocsfFileSystem: {"1", "File System Activity"},
	ocsfProcess:    {"1", "Process Activity"},
	ocsfNetwork:    {"4", "Network Activity"},
	ocsfAPI:        {"6", "API Activity"},
}

var ocsfCategory = map[string]string{"1": "System Activity", "4": "Network Activity", "6": "Application Activity"}

// OCSF renders r as one OCSF event. Every record keeps its sandboxd form under
// unmapped.sandboxd (seq, hash and prev included), so nothing the log says is lost, and a
// SIEM can still tie the event to the signed chain.
func OCSF(r *Record, host string) ([]byte, error) {
	class, activity, activityName := ocsfActivity(r)
	cat := ocsfClass[class][0]
	catID, _ := strconv.Atoi(cat)
	ev := map[string]any{
		"class_uid": class, "class_name": ocsfClass[class][1],
		"category_uid": catID, "category_name": ocsfCategory[cat],
		"activity_id": activity, "activity_name": activityName,
		"type_uid": class*100 + activity,
		"time":     r.Time.UnixMilli(),
		"metadata": map[string]any{
			"version":       OCSFVersion,
			"product":       map[string]any{"name": "sandboxd", "vendor_name": "sandboxd"},
			"uid":           strconv.FormatUint(r.Seq, 10),
			"original_time": r.Time.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"),
			"log_name":      "audit",
			"event_code":    string(r.Kind),
			"profiles":      []string{"host", "security_control"},
		},
		"device":   map[string]any{"hostname": host, "type_id": 1, "type": "Server"},
		"actor":    ocsfActor(r),
		"message":  ocsfMessage(r),
		"unmapped": map[string]any{"sandboxd": r},
	}
	sev, status := 1, "Success"
	if d := r.Decision; d != nil {
		switch d.Behavior {
		case "allow":
			ev["disposition_id"], ev["disposition"] = 1, "Allowed"
		case "deny":
			ev["disposition_id"], ev["disposition"] = 2, "Blocked"
			sev, status = 3, "Failure"
		default:
			ev["disposition_id"], ev["disposition"] = 99, "Ask"
			sev = 2
		}
	}
	if o := r.Outcome; o != nil && (o.Error != "" || o.ExitCode != 0 || o.Timeout) {
		// A command past its timeout failed as a call, whether it was killed or went on as a
		// task (whose own end is its task.end).
		status = "Failure"
	}
	if r.Kind == KindTaskEnd && (r.Detail["status"] != "completed" || r.Detail["exit_code"] != "0") {
		status = "Failure" // killed, failed, or a command that exited non-zero
	}
	if (r.Kind == KindCallReport || r.Kind == KindCallDecide) && status == "Success" {
		// The caller ran it (or not) itself: a decision given, or the caller's own word of
		// what it ran, is no launch sandboxd saw succeed.
		status = "Unknown"
	}
	ev["severity_id"], ev["severity"] = sev, map[int]string{1: "Informational", 2: "Low", 3: "Medium"}[sev]
	ev["status"], ev["status_id"] = status, map[string]int{"Unknown": 0, "Success": 1, "Failure": 2}[status]
	in := inputFields(r.Input)
	switch class {
	case ocsfProcess:
		ev["process"] = map[string]any{"name": "bash", "cmd_line": in["command"], "file": map[string]any{"name": "bash", "type_id": 1}}
	case ocsfFileSystem:
		// What the call acted on, by the tools' names for it (NotebookEdit's notebook_path
		// too, which left its events with no path).
		var p string
		for _, k := range []string{"file_path", "notebook_path", "path", "pattern"} {
			if p = in[k]; p != "" {
				break
			}
		}
		name := p[strings.LastIndex(p, "/")+1:]
		ev["file"] = map[string]any{"path": p, "name": name, "type_id": 1, "type": "Regular File"}
	case ocsfNetwork:
		port, _ := strconv.Atoi(r.Detail["port"])
		ev["dst_endpoint"] = map[string]any{"hostname": r.Detail["host"], "ip": r.Detail["ip"], "port": port}
		ev["src_endpoint"] = map[string]any{"hostname": host}
	case ocsfAPI:
		ev["api"] = map[string]any{"operation": string(r.Kind), "service": map[string]any{"name": "sandboxd"}}
		// Required by the class; a daemon on one host has no cloud, which OCSF spells so.
		ev["cloud"] = map[string]any{"provider": "none (local host)"}
		ev["src_endpoint"] = map[string]any{"hostname": host}
	}
	return json.Marshal(ev)
}

func ocsfActivity(r *Record) (class, id int, name string) {
	if r.Kind == KindNetConnect {
		if r.Decision != nil && r.Decision.Behavior != "allow" {
			return ocsfNetwork, 5, "Refuse"
		}
		return ocsfNetwork, 1, "Open"
	}
	if r.Kind == KindTaskEnd {
		return ocsfProcess, 2, "Terminate"
	}
	if strings.HasPrefix(string(r.Kind), "call.") {
		switch r.Tool {
		case "Bash":
			return ocsfProcess, 1, "Launch"
		case "Read", "Glob", "Grep":
			return ocsfFileSystem, 2, "Read"
		case "Write":
			return ocsfFileSystem, 1, "Create"
		case "Edit", "MultiEdit", "NotebookEdit":
			return ocsfFileSystem, 3, "Update"
		}
		return ocsfAPI, 99, "Other"
	}
	switch {
	case strings.HasSuffix(string(r.Kind), ".create"), r.Kind == KindApprovalRequest:
		return ocsfAPI, 1, "Create"
	case strings.HasSuffix(string(r.Kind), ".update"), r.Kind == KindApprovalResolve, r.Kind == KindPolicyLoad,
		r.Kind == KindSessionSuspend, r.Kind == KindSessionResume:
		return ocsfAPI, 3, "Update"
	case strings.HasSuffix(string(r.Kind), ".delete"):
		return ocsfAPI, 4, "Delete"
	}
	return ocsfAPI, 99, "Other"
}

func ocsfActor(r *Record) map[string]any {
	a := map[string]any{"app_name": "sandboxd"}
	if c := r.Caller; c != nil {
		u := map[string]any{"uid": strconv.FormatUint(uint64(c.UID), 10)}
		if c.User != "" {
			u["name"] = c.User
		}
		a["user"] = u
		a["process"] = map[string]any{"pid": c.PID}
	} else {
		a["user"] = map[string]any{"uid": "0", "name": "root", "type_id": 3, "type": "System"}
	}
	if r.Session != "" {
		a["session"] = map[string]any{"uid": r.Session}
	}
	return a
}

func ocsfMessage(r *Record) string {
	msg := string(r.Kind)
	if r.Tool != "" {
		msg += " " + r.Tool
	}
	if d := r.Decision; d != nil {
		msg += ": " + d.Behavior
		if d.Reason != "" {
			msg += " (" + d.Reason + ")"
		}
	}
	return msg
}

// inputFields are the input's top-level string fields.
func inputFields(raw json.RawMessage) map[string]string {
	var m map[string]any
	out := map[string]string{}
	if json.Unmarshal(raw, &m) != nil {
		return out
	}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}
