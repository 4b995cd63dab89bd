package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/durable"
	"github.com/sandboxd/sandboxd/sandbox"
)

// runMarkerName is the state directory's file saying a daemon serves from it. A clean stop
// removes it after its daemon.stop record; one found at start means the previous daemon died
// (killed, crashed, the host lost power) with calls perhaps in flight, whose call.start has no
// call.end: the next daemon.start says so, and which, for whoever reads the log after.
const runMarkerName = "sandboxd.running"

// maxUnfinishedListed bounds the call ids a daemon.start names; the count is always whole.
const maxUnfinishedListed = 50

// runMarker is what a serving daemon leaves in its state directory.
type runMarker struct {
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// AuditFile is the log file that was current before its daemon.start: the records of
	// that run are in it and the files after it.
	AuditFile string `json:"audit_file"`
}

// readRunMarker returns the marker a previous daemon left, or nil when it stopped cleanly
// (or none ever ran here). The state directory is root's and locked by now.
func readRunMarker(stateDir string) (*runMarker, error) {
	f, err := os.OpenFile(filepath.Join(stateDir, runMarkerName), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run marker: %w", err)
	}
	defer f.Close()
	var m runMarker
	if err := json.NewDecoder(io.LimitReader(f, 4<<10)).Decode(&m); err != nil {
		// Unreadable (torn by the crash it reports): the stop was still unclean.
		return &runMarker{}, nil
	}
	return &m, nil
}

// writeRunMarker records that this daemon serves from stateDir, durably: a crash right after
// must still be seen at the next start.
func writeRunMarker(stateDir string, m runMarker) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(stateDir, runMarkerName), b); err != nil {
		return fmt.Errorf("write run marker: %w", err)
	}
	return nil
}

// removeRunMarker ends the run cleanly: called after the daemon.stop record is durable.
func removeRunMarker(stateDir string) error {
	err := os.Remove(filepath.Join(stateDir, runMarkerName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// uncleanStopDetail is what a daemon.start says about a previous daemon that did not stop
// cleanly: its pid and start, and the calls it started whose end it never recorded (found in
// the log files of its run only).
func uncleanStopDetail(auditDir string, prev *runMarker) map[string]string {
	d := map[string]string{"previous_stop": "unclean"}
	if prev.PID > 0 {
		d["previous_pid"] = strconv.Itoa(prev.PID)
	}
	if !prev.Started.IsZero() {
		d["previous_start"] = prev.Started.UTC().Format(time.RFC3339Nano)
	}
	u, err := unfinishedCalls(auditDir, prev)
	if err != nil {
		d["unfinished_calls_error"] = err.Error()
		return d
	}
	d["unfinished_calls"] = strconv.Itoa(u.calls)
	if len(u.callIDs) > 0 {
		d["unfinished_call_ids"] = strings.Join(u.callIDs, ",")
	}
	d["unfinished_tasks"] = strconv.Itoa(u.tasks)
	if len(u.taskIDs) > 0 {
		d["unfinished_task_ids"] = strings.Join(u.taskIDs, ",")
	}
	return d
}

// recoveredDetail is what a daemon.start says of the sweeps it ran after the calls a dead
// daemon left running (sandbox.RecoverJournals): how many, and what they moved aside (the
// first maxUnfinishedListed paths, with each one's session and call).
func recoveredDetail(rs []sandbox.Recovered) map[string]string {
	if len(rs) == 0 {
		return nil
	}
	type moved struct {
		UID     uint32 `json:"uid"`
		Session string `json:"session,omitempty"`
		Call    string `json:"call,omitempty"`
		Path    string `json:"path"`
	}
	var list []moved
	n := 0
	for _, r := range rs {
		n += len(r.Moved) + r.MovedMore
		for _, p := range r.Moved {
			if len(list) < maxUnfinishedListed {
				list = append(list, moved{r.UID, r.Session, r.Call, p})
			}
		}
	}
	d := map[string]string{"recovered_sweeps": strconv.Itoa(len(rs)), "recovered_moved_aside": strconv.Itoa(n)}
	if len(list) > 0 {
		b, _ := json.Marshal(list)
		d["recovered_moved_aside_paths"] = string(b)
	}
	return d
}

// unfinished is what a run left without an end record: calls and background tasks, the
// first maxUnfinishedListed ids of each, oldest first, and how many there are.
type unfinished struct {
	callIDs, taskIDs []string
	calls, tasks     int
}

// unfinishedCalls finds the call.start records of prev's run with no call.end after them, and
// the background tasks a call.end started with no task.end: calls and tasks that may have had
// effects the log does not show the end of. A call is paired with its end by session and
// tool_use_id, which no two running calls of a session share (session.ClaimToolUseID).
func unfinishedCalls(auditDir string, prev *runMarker) (unfinished, error) {
	f := audit.Filter{Kinds: []audit.Kind{audit.KindCallStart, audit.KindCallEnd, audit.KindTaskEnd}, Since: prev.Started}
	type key struct {
		task        bool
		session, id string
	}
	open := map[key]int{}
	var order []key
	begin := func(k key) {
		open[k] = len(order)
		order = append(order, k)
	}
	for r, err := range audit.QueryFrom(auditDir, prev.AuditFile, f) {
		if err != nil {
			return unfinished{}, err
		}
		switch {
		case r.Kind == audit.KindCallStart:
			begin(key{false, r.Session, r.ToolUseID})
		case r.Kind == audit.KindCallEnd:
			delete(open, key{false, r.Session, r.ToolUseID})
			if r.Outcome != nil && r.Outcome.TaskID != "" {
				begin(key{true, r.Session, r.Outcome.TaskID})
			}
		case r.Kind == audit.KindTaskEnd:
			delete(open, key{true, r.Session, r.Detail["task_id"]})
		}
	}
	var u unfinished
	for i, k := range order {
		if j, ok := open[k]; !ok || j != i {
			continue
		}
		if k.task {
			u.tasks++
			if len(u.taskIDs) < maxUnfinishedListed {
				u.taskIDs = append(u.taskIDs, k.id)
			}
		} else {
			u.calls++
			if len(u.callIDs) < maxUnfinishedListed {
				u.callIDs = append(u.callIDs, k.id)
			}
		}
	}
	return u, nil
}
