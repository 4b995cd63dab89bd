package executor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// Output bounds of one command.
const (
	// sinkMemBytes is what the daemon keeps of a stream in memory; past it the stream spills
	// to a file for the owner, so memory stays bounded whatever the command prints.
	sinkMemBytes = 256 << 10
	// sinkImageMemBytes is kept in memory instead when the stream starts as an image.
	sinkImageMemBytes = MaxImageBytes
	sinkTailBytes     = 8 << 10
	// progressBytes is how much of a stream is streamed as progress events.
	progressBytes = 4 << 20
	// defaultOutputHardCap kills a command past this much output (COMPAT: > 5 GB kills).
	defaultOutputHardCap = 5 << 30
	maxTasksPerSession   = 32
)

// outputSink holds one stream of a command: the head in memory, everything (up to
// MaxPersistedBytes) in a spill file once the head is full, and the last bytes for
// head+tail views. It is safe for concurrent use (the reader writes, BashOutput reads).
type outputSink struct {
	h *Host
	s *session.Session

	mu       sync.Mutex
	head     []byte
	memCap   int
	spill    *hashingFile
	reserved int64 // of the owner's persisted bytes, for the spill (Host.reserve)
	spillErr error
	total    int64
	tail     []byte // ring of the last sinkTailBytes, in order
	sniffed  bool
	// task: the stream is a background task's, read as text only (forTask).
	task bool
}

func newSink(h *Host, s *session.Session) *outputSink {
	return &outputSink{h: h, s: s, memCap: sinkMemBytes}
}

func (o *outputSink) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.sniffed {
		o.sniffed = true
		if !o.task && worker.SniffImage(p) != "" {
			o.memCap = sinkImageMemBytes
		}
	}
	o.total += int64(len(p))
	if len(p) >= sinkTailBytes {
		o.tail = append(o.tail[:0], p[len(p)-sinkTailBytes:]...)
	} else {
		if drop := len(o.tail) + len(p) - sinkTailBytes; drop > 0 {
			o.tail = append(o.tail[:0], o.tail[drop:]...)
		}
		o.tail = append(o.tail, p...)
	}
	if o.spill == nil && o.spillErr == nil {
		if need := len(o.head) + len(p); need <= o.memCap {
			if need > cap(o.head) {
				// Grown by doubling, but never past memCap: append's growth would let the
				// head hold up to twice what it keeps.
				h := make([]byte, len(o.head), min(max(2*cap(o.head), need), o.memCap))
				copy(h, o.head)
				o.head = h
			}
			o.head = append(o.head, p...)
			return len(p), nil
		}
		o.startSpill()
		if o.task && o.spill != nil {
			o.head = nil // a task's output is read from the file from now on
		}
	}
	if o.spill != nil && o.spill.n < MaxPersistedBytes {
		q := p[:min(int64(len(p)), MaxPersistedBytes-o.spill.n)]
		if err := o.reserveFor(int64(len(q))); err != nil {
			o.spillErr = err
			o.discardSpill()
			return len(p), nil
		}
		if _, err := o.spill.Write(q); err != nil {
			o.spillErr = err
		}
	}
	return len(p), nil
}

// spillReserve is how much a spill reserves of its owner's persisted bytes at a time: the
// ledger's lock is taken once per this much output, not per read.
const spillReserve = 256 << 10

// reserveFor makes sure the spill's reservation covers n more bytes; o.mu is held.
func (o *outputSink) reserveFor(n int64) error {
	if o.spill.n+n <= o.reserved {
		return nil
	}
	more := max(spillReserve, o.spill.n+n-o.reserved)
	if err := o.h.reserve(o.s, more); err != nil {
		return err
	}
	o.reserved += more
	return nil
}

// startSpill moves the head into a new result file; o.mu is held.
func (o *outputSink) startSpill() {
	f, err := o.h.createResultFile(o.s)
	if err != nil {
		o.spillErr = err
		return
	}
	o.spill = &hashingFile{f: f, h: sha256.New()}
	if err := o.reserveFor(int64(len(o.head))); err != nil {
		o.spillErr = err
		o.discardSpill()
		return
	}
	if _, err := o.spill.Write(o.head); err != nil {
		o.spillErr = err
	}
}

// Total is the number of bytes the stream carried.
func (o *outputSink) Total() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.total
}

// ReadAt returns up to n bytes from offset off of what is kept, and whether bytes past the
// kept part were dropped.
func (o *outputSink) ReadAt(off int64, n int) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.spill == nil {
		if off >= int64(len(o.head)) {
			return nil, nil
		}
		end := min(int64(len(o.head)), off+int64(n))
		return append([]byte(nil), o.head[off:end]...), nil
	}
	if off >= o.spill.n {
		return nil, nil
	}
	buf := make([]byte, min(int64(n), o.spill.n-off))
	// The spill file was opened write-only; read through a second descriptor.
	f, err := os.Open(o.spill.f.Name())
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("read task output: %w", err))
	}
	defer f.Close()
	m, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("read task output: %w", err))
	}
	return buf[:m], nil
}

// sinkView is how a finished stream is shown.
type sinkView struct {
	text      string // inline text, or the preview block
	image     *Block
	persisted string // path of the saved full output
	total     int64
}

// finish decides how the stream is shown: inline up to limitChars; otherwise saved for the
// owner with a preview; with headTail (failures, COMPAT), head and tail of ~10 000 chars and
// no file.
func (o *outputSink) finish(limitChars int, headTail bool) sinkView {
	o.mu.Lock()
	defer o.mu.Unlock()
	v := sinkView{total: o.total}
	if o.spill == nil && o.total > 0 {
		if mt := worker.SniffImage(o.head); mt != "" && int64(len(o.head)) == o.total {
			v.image = &Block{Type: "image", MediaType: mt, Data: base64Yielding(o.head)}
			return v
		}
	}
	if o.spill == nil && o.total <= int64(limitChars) && runeLen(o.head) <= limitChars {
		v.text = string(o.head)
		return v
	}
	if headTail {
		h := o.head[:min(len(o.head), 5000)]
		t := o.tail[len(o.tail)-min(5000, len(o.tail)):]
		v.text = fmt.Sprintf("%s\n\n... [%s of output omitted] ...\n\n%s", toValidUTF8(string(h)), humanBytes(o.total-int64(len(h)+len(t))), toValidUTF8(string(t)))
		o.discardSpill()
		return v
	}
	if o.spill == nil && o.spillErr == nil {
		o.startSpill()
	}
	note := ""
	if o.total > MaxPersistedBytes {
		note = fmt.Sprintf("Only the first %s of %s were saved.", humanBytes(MaxPersistedBytes), humanBytes(o.total))
	}
	preview := previewOf(toValidUTF8(string(o.head[:min(len(o.head), PreviewChars*4)])))
	if o.spillErr != nil {
		o.discardSpill()
		why := string(errcode.Of(o.spillErr))
		if errors.Is(o.spillErr, errSpillOverLimit) {
			why = o.spillErr.Error() // the owner's own limit: say it in full
		}
		v.text = preview + fmt.Sprintf("\n\n[output truncated: %s in total; it could not be saved (%s). Narrow the command's output]", humanBytes(o.total), why)
		return v
	}
	size := o.spill.n
	path, err := o.spill.finish()
	o.spill = nil
	o.h.unreserve(o.s, o.reserved)
	o.reserved = 0
	if err == nil {
		err = o.h.account(o.s, path, size)
	}
	if err != nil {
		// The error is about the owner's own output and limits (persisted_bytes_per_user):
		// say it in full.
		v.text = preview + fmt.Sprintf("\n\n[output truncated: %s in total; it could not be saved: %v]", humanBytes(o.total), err)
		return v
	}
	v.persisted = path
	v.text = PersistedBlock(path, o.total, preview, note)
	return v
}

// discardSpill removes the spill file; o.mu is held.
func (o *outputSink) discardSpill() {
	if o.spill != nil {
		o.spill.discard()
		o.spill = nil
	}
	if o.reserved > 0 {
		o.h.unreserve(o.s, o.reserved)
		o.reserved = 0
	}
}

// forTask bounds what the stream of a background task keeps in memory, for as long as the
// task is kept: its output is read as text (BashOutput), never as an image, so what an image
// kept in memory goes to the spill file as any long output does, and once there is a spill
// file the head is let go (a task's output is read from the file then).
func (o *outputSink) forTask() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.task, o.memCap = true, sinkMemBytes
	if o.spill == nil && o.spillErr == nil && len(o.head) > o.memCap {
		o.startSpill()
	}
	switch {
	case o.spill != nil:
		o.head = nil
	case len(o.head) > o.memCap:
		o.head = append([]byte(nil), o.head[:o.memCap]...) // not saved: the rest is lost
	}
}

// close releases the spill file without naming it (tasks keep it until the session goes).
func (o *outputSink) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.discardSpill()
}

// task is a background command: started with run_in_background or moved there on timeout.
type task struct {
	id        string
	sessionID string
	// session is the task's session: StopTasks stops a narrowed session's tasks and its
	// sub-agents', which it bounds.
	session *session.Session
	tenant  uint32 // the session owner's tenant (session.Caller.Tenant): tasks_per_user counts by it
	command string
	started time.Time
	run     *bashRun

	mu     sync.Mutex
	offOut int64 // next unread byte of stdout
	offErr int64
}

func newTaskID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "bash_" + hex.EncodeToString(b[:])
}

// addTask registers a running command as a background task of its session.
func (h *Host) addTask(s *session.Session, id, command string, run *bashRun) (*task, error) {
	ts := h.tools()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if s.Closed() {
		// StopSession sweeps a session's tasks under ts.mu after it is closed: one added now
		// would run on with nobody able to see or stop it.
		return nil, errSessionClosed(s)
	}
	if ts.tasks == nil {
		ts.tasks = map[string]*task{}
	}
	var mine []*task
	running := 0
	for _, t := range ts.tasks {
		if t.sessionID == s.ID {
			mine = append(mine, t)
			if !t.run.finished() {
				running++
			}
		}
	}
	if running >= maxTasksPerSession {
		return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("this session already has %d background commands running; stop some with KillShell first", running))
	}
	lim := h.limits()
	userRunning := 0
	for _, t := range ts.tasks {
		if t.tenant == s.Owner.Tenant() && !t.run.finished() {
			userRunning++
		}
	}
	if userRunning >= lim.TasksPerUser {
		return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s already has %d background commands running in its sessions (limits.tasks_per_user); stop some with KillShell first", s.Owner.TenantName(), userRunning))
	}
	// Forget the oldest finished tasks past the bounds, so the table stays bounded: per
	// session, and per user over all its sessions (each task keeps its output's head in
	// the daemon's memory until it is forgotten).
	forget := func(tasks []*task, keep int) {
		sort.Slice(tasks, func(i, j int) bool { return tasks[i].started.Before(tasks[j].started) })
		n := len(tasks)
		for _, t := range tasks {
			if n < keep {
				break
			}
			if t.run.finished() && ts.tasks[t.id] == t {
				t.run.stdout.close()
				t.run.stderr.close()
				delete(ts.tasks, t.id)
				n--
			}
		}
	}
	forget(mine, maxTasksPerSession*2)
	var users []*task
	for _, t := range ts.tasks {
		if t.tenant == s.Owner.Tenant() {
			users = append(users, t)
		}
	}
	forget(users, max(1, lim.TasksPerUser)*2)
	run.stdout.forTask()
	run.stderr.forTask()
	t := &task{id: id, sessionID: s.ID, session: s, tenant: s.Owner.Tenant(), command: command, started: time.Now(), run: run}
	ts.tasks[id] = t
	// A task never outlives limits.task_max_seconds: nothing of a user outlives its bounds.
	// Kill on a finished run is a no-op, so the timer needs no stopping.
	time.AfterFunc(lim.TaskMaxLifetime, func() { run.kill("task_max_seconds") })
	if h.TaskEnded != nil {
		go func() {
			<-run.done
			res, err, _ := run.result()
			h.TaskEnded(s, id, res, err)
		}()
	}
	return t, nil
}

// task returns the session's task id.
func (h *Host) task(s *session.Session, id string) (*task, error) {
	ts := h.tools()
	ts.mu.Lock()
	t := ts.tasks[id]
	ts.mu.Unlock()
	if t == nil || t.sessionID != s.ID {
		return nil, errcode.Msg(errcode.NotFound, fmt.Sprintf("no background shell %q in this session; the ids are in the Bash results of run_in_background commands (see also TaskList: %s)", id, h.taskIDs(s)))
	}
	return t, nil
}

func (h *Host) taskIDs(s *session.Session) string {
	ts := h.tools()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var ids []string
	for id, t := range ts.tasks {
		if t.sessionID == s.ID {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "none"
	}
	sort.Strings(ids)
	return fmt.Sprint(ids)
}

// Tasks lists the session's background commands (for the API's task list).
func (h *Host) Tasks(s *session.Session) []map[string]any {
	ts := h.tools()
	ts.mu.Lock()
	var mine []*task
	for _, t := range ts.tasks {
		if t.sessionID == s.ID {
			mine = append(mine, t)
		}
	}
	ts.mu.Unlock()
	sort.Slice(mine, func(i, j int) bool { return mine[i].started.Before(mine[j].started) })
	out := make([]map[string]any, 0, len(mine))
	for _, t := range mine {
		out = append(out, t.status())
	}
	return out
}

func (t *task) status() map[string]any {
	m := map[string]any{"id": t.id, "command": t.command, "started": t.started.UTC(), "status": "running",
		"stdout_bytes": t.run.stdout.Total(), "stderr_bytes": t.run.stderr.Total()}
	if res, err, ok := t.run.result(); ok {
		m["status"] = "completed"
		if err != nil {
			m["status"] = "failed"
		} else {
			m["exit_code"] = res.ExitCode
			if res.KilledBy != "" {
				m["status"] = "killed"
				m["killed_by"] = res.KilledBy
			}
			if len(res.MovedAside) > 0 {
				m["moved_aside"] = res.MovedAside
			}
			if res.MovedAsideMore > 0 {
				m["moved_aside_more"] = res.MovedAsideMore
			}
		}
	}
	return m
}

// bashRun is one started command: its process, its two streams and its end.
type bashRun struct {
	proc   *sandbox.Process
	stdout *outputSink
	stderr *outputSink
	cancel context.CancelFunc
	done   chan struct{}   // closed after the process was reaped and both streams drained
	exit   chan exitReport // what the shell said as it exited, when asked
	// progressOff stops progress events (the call returned; the command goes on).
	progressOff     func()
	killedForOutput atomic.Bool

	mu  sync.Mutex
	res *sandbox.Result
	err error
}

func (r *bashRun) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *bashRun) result() (*sandbox.Result, error, bool) {
	if !r.finished() {
		return nil, nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.res, r.err, true
}

func (r *bashRun) kill(reason string) {
	_ = r.proc.Kill(reason)
}

// KilledNarrowed is what a command StopTasks stopped reports killed it.
const KilledNarrowed = "session_narrowed"

// killedSessionDeleted is what a command StopSession stopped reports killed it.
const killedSessionDeleted = "session_deleted"

// StopTasks kills the commands still running in s and in its sub-agents, background and
// foreground, for reason (a narrowed session: they were started with what it no longer
// gives), and returns how many it stopped. A foreground one's caller gets its result, killed.
func (h *Host) StopTasks(s *session.Session, reason string) int {
	ts := h.tools()
	ts.mu.Lock()
	var running []*bashRun
	for _, t := range ts.tasks {
		if (t.session == s || t.session.Descends(s)) && !t.run.finished() {
			running = append(running, t.run)
		}
	}
	for r, rs := range ts.running {
		if (rs == s || rs.Descends(s)) && !r.finished() && !slices.Contains(running, r) {
			running = append(running, r)
		}
	}
	ts.mu.Unlock()
	for _, r := range running {
		r.kill(reason)
	}
	return len(running)
}

// stopIfNarrowed kills run, started for c, when c's session narrowed after c was decided:
// StopTasks, run at the narrowing, did not see it yet.
func (c *Call) stopIfNarrowed(run *bashRun) {
	if c.Session.Narrowings() != c.narrowings {
		run.kill(KilledNarrowed)
	}
}

// trackForeground registers run, a foreground command of s, for StopTasks and StopSession
// until the returned func is called.
func (h *Host) trackForeground(s *session.Session, run *bashRun) (untrack func()) {
	ts := h.tools()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.running == nil {
		ts.running = map[*bashRun]*session.Session{}
	}
	ts.running[run] = s
	return func() {
		ts.mu.Lock()
		delete(ts.running, run)
		ts.mu.Unlock()
	}
}
