package audit

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Defaults for zero Config fields.
const (
	DefaultMaxFileBytes       = 64 << 20
	DefaultMaxFileAge         = 24 * time.Hour
	DefaultCheckpointEvery    = 1000
	DefaultCheckpointInterval = time.Minute
	DefaultSyslogAddr         = "/dev/log"
	defaultMaxBatch           = 256
	probeInterval             = time.Second
)

// Config configures the log. Zero values take the defaults above; retention is off by default
// because deleting audit history is the less safe choice.
type Config struct {
	Dir string // log files, head.json; created 0700
	// KeyDir holds audit.key/audit.pub (0600); default Dir. Put it elsewhere to keep the signing
	// key out of copies of the log directory.
	KeyDir string

	MaxFileBytes int64         // rotate when the current file reaches this size
	MaxFileAge   time.Duration // rotate when the current file's first record is this old
	Retain       int           // keep at most this many log files (0: keep all)
	RetainAge    time.Duration // delete rotated files last written longer ago (0: keep)
	// MinRetainAge: a rotated file whose newest record is younger than this is never deleted,
	// whatever Retain and RetainAge say (audit.retain_days).
	MinRetainAge time.Duration
	// MaxInputBytes bounds a record's stored input (0: no bound); see truncatedInput.
	MaxInputBytes int
	// MinFreeBytes: below this much free space on Dir, records of new work are refused (0: no check).
	MinFreeBytes int64
	// MaxBytesPerUserHour bounds what one uid's records of new work add to the log in an hour
	// (0: no bound); see chargeOwner.
	MaxBytesPerUserHour int64

	CheckpointEvery    int           // signed checkpoint after this many records
	CheckpointInterval time.Duration // ... or this long after the last one, if records came since

	// SyslogAddr, if set, forwards a copy of each record as RFC 5424 to a unix socket:
	// "/dev/log" or "unixgram:/path" (datagram) or "unix:/path" (stream, newline-framed).
	SyslogAddr string
	SyslogApp  string // APP-NAME; default "sandboxd"
	// SyslogOCSF sends each record as an OCSF event (OCSF) after the header, not its line.
	SyslogOCSF bool

	maxBatch int // 1 disables group commit; the benchmark compares against it
}

func (c Config) withDefaults() Config {
	if c.KeyDir == "" {
		c.KeyDir = c.Dir
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.MaxFileAge == 0 {
		c.MaxFileAge = DefaultMaxFileAge
	}
	if c.CheckpointEvery == 0 {
		c.CheckpointEvery = DefaultCheckpointEvery
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = DefaultCheckpointInterval
	}
	if c.SyslogApp == "" {
		c.SyslogApp = "sandboxd"
	}
	if c.maxBatch == 0 {
		c.maxBatch = defaultMaxBatch
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("audit config: dir is required")
	case c.MaxFileBytes < 0, c.MaxFileAge < 0, c.Retain < 0, c.RetainAge < 0, c.MinRetainAge < 0, c.MaxInputBytes < 0, c.MinFreeBytes < 0, c.MaxBytesPerUserHour < 0,
		c.CheckpointEvery < 0, c.CheckpointInterval < 0:
		return errors.New("audit config: sizes, ages and counts must not be negative")
	}
	return nil
}

// Log is the append-only audit log. One writer goroutine owns the file; Append hands it
// records and waits until they are fsynced (group commit: one fdatasync per batch).
type Log struct {
	cfg  Config
	log  *zap.Logger
	key  ed25519.PrivateKey
	fwd  *forwarder
	reqs chan *request
	cps  chan chan error // Checkpoint requests
	quit chan struct{}
	done chan struct{}

	mu     sync.RWMutex // guards closed against sends on reqs
	closed bool
	// rotations is Rotations.
	rotations atomic.Uint64

	healthy atomic.Bool
	// preparing counts Appends between entry and enqueue (redacting, encoding). The writer
	// waits briefly for them so a batch is not cut just before they arrive.
	preparing atomic.Int64
	syncs     atomic.Int64 // fsyncs of the log file; the benchmark reports records per sync
	// spaceChecked is when the free space was last looked up (unix ns); spaceLow its answer.
	spaceChecked atomic.Int64
	spaceLow     atomic.Bool
	// owners are the uids' byte budgets (chargeOwner).
	owners ownerBudgets

	// wmu is held by whoever writes: the writer goroutine, from the moment it takes something
	// in until it waits again, or an AppendWritten that finds it idle (writeNow). Everything
	// below that the comments call the writer goroutine's is guarded by it.
	wmu   sync.Mutex
	w     writer // the writer's (and Open's, before the writer starts)
	heads *headWriter

	// queued holds Enqueue's records. Nobody waits for them, so Enqueue adds them here without
	// waking the writer (a wake-up costs the caller a futex call and a thread switch): the
	// writer takes them in, ahead of it, with the next request that has a waiter — usually the
	// same call's end — or when queueTimer fires, queuedHold after the first one.
	queuedMu   sync.Mutex
	queued     []*request
	queueTimer *time.Timer

	// The fsync runs beside the writer, so records keep being written (and written-only
	// waiters answered) while the disk syncs. One sync at a time; all owned by the writer
	// goroutine except syncDone, which the sync goroutine sends on.
	syncDone  chan error
	inflight  bool
	syncing   syncWait // answered by the fsync in flight
	waiting   syncWait // written since it began: answered by the next one
	syncBroke bool     // an fsync failed: records written since the last good one are not known durable
	// Records nobody waits to be durable for (AppendWritten, Enqueue) do not start an fsync
	// of their own: the next durable record's covers them, or syncTimer's, writtenSyncDelay
	// after the first of them (syncArmed); syncDue makes the next startSync run regardless.
	syncTimer *time.Timer
	syncArmed bool
	syncDue   bool
	// gathered is what the gather in progress has written so far; gatherBackoff how many
	// more syncs skip the post-sync gather, gatherPenalty the last backoff. Owned by the
	// writer goroutine.
	gathered      int
	gatherBackoff int
	gatherPenalty int
	written       []*request // written by write, answered by answerWritten
	held          int        // requests the writer goroutine took in and holds for the next sync
}

type writer struct {
	f       *os.File
	name    string
	off     int64 // end of the last durable record: the file is never left longer than this
	dirty   bool  // bytes past off could not be truncated away yet
	started time.Time
	seq     uint64
	hash    string
	pending []*Record // log-written records (rotate, torn tail) that must precede the next batch
	sinceCP int
	lastCP  time.Time
	line    []byte // reused batch buffer
}

type request struct {
	rec  Record
	body []byte // encodeBody(&rec), done by the caller's goroutine
	done chan error
	// written asks to be answered once the record is in the file; the others are answered
	// once an fsync that began after their write has returned.
	written bool
}

// syncWait is what one fsync will answer: the durable waiters written before it began and the
// checkpoints among them, whose head is published once they are on disk.
type syncWait struct {
	reqs    []*request
	cps     []headCP
	written bool // something was written since the last sync began
}

type headCP struct {
	rec  *Record
	file string
}

// Open opens (or creates) the log in cfg.Dir, recovers a torn tail left by a crash, and starts
// the writer. If the recovery records cannot be written yet, Open still succeeds with
// Healthy()==false and they go first once the disk accepts writes again.
func Open(cfg Config, log *zap.Logger) (*Log, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = zap.NewNop()
	}
	l := &Log{
		cfg:      cfg,
		log:      log.Named("audit"),
		reqs:     make(chan *request, 4*cfg.maxBatch),
		cps:      make(chan chan error),
		syncDone: make(chan error, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.queueTimer = time.NewTimer(queuedHold)
	l.queueTimer.Stop()
	l.syncTimer = time.NewTimer(writtenSyncDelay)
	l.syncTimer.Stop()
	if err := secureDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := secureDir(cfg.KeyDir); err != nil {
		return nil, err
	}
	if moved, err := moveKey(cfg.Dir, cfg.KeyDir); err != nil {
		return nil, err
	} else if moved {
		l.log.Warn("audit signing key moved out of the log directory; copies of the log no longer carry it",
			zap.String("from", cfg.Dir), zap.String("to", cfg.KeyDir))
	}
	key, created, err := loadOrCreateKey(cfg.KeyDir)
	if err != nil {
		return nil, err
	}
	l.key = key
	l.warnSharedVolume()
	if err := l.recover(created); err != nil {
		return nil, err
	}
	l.heads = newHeadWriter(l.writeHead)
	l.healthy.Store(true)
	if len(l.w.pending) > 0 {
		// A cut-back record is signed at once: the head it replaces was the only evidence,
		// and a second start before the next checkpoint would otherwise find that head again.
		// So is a key replacement: a verifier takes it only under the new key's signature.
		l.commit(nil, l.w.pendingAlarm())
		l.flushSync()
	}
	if cfg.SyslogAddr != "" {
		l.fwd = newForwarder(cfg.SyslogAddr, cfg.SyslogApp, cfg.SyslogOCSF, l.log)
	}
	go l.run()
	return l, nil
}

// AppendWritten is Append for a record that must survive a crash of this process before the
// caller goes on, but need not wait for the disk: it returns once the record's whole line is
// in the log file (the kernel has it). The fsync follows at once, beside the writer; if it
// fails, the log turns unhealthy and refuses durable appends until a sync succeeds.
func (l *Log) AppendWritten(ctx context.Context, r *Record) error {
	return l.append(ctx, r, waitWritten)
}

// Enqueue hands r to the writer without waiting for it to be durable: it is written, in
// order, with the next group commit. Use it only where a later Append covers it — the writer
// commits in order, so once an Append made after Enqueue returns, r is durable too. A write
// failure shows in Healthy and in that later Append.
func (l *Log) Enqueue(r *Record) error {
	return l.append(context.Background(), r, waitNone)
}

// Append writes r and returns once it is durable. r.Input is redacted and r.InputDigest set
// here (pass the raw input); Seq, Time, Prev, Hash and V are set by the log and copied back into
// r on success. Any error means the record is not known to be durable and the effect it
// describes must not happen: write failures are *errcode.Error with errcode.AuditUnavailable.
func (l *Log) Append(ctx context.Context, r *Record) error {
	return l.append(ctx, r, waitDurable)
}

// waitFor is how far append waits: not at all, until the record is written, until durable.
type waitFor int

const (
	waitNone waitFor = iota
	waitWritten
	waitDurable
)

func (l *Log) append(ctx context.Context, r *Record, wait waitFor) error {
	if !callerKinds[r.Kind] {
		if logKinds[r.Kind] {
			return errcode.New(errcode.Validation, fmt.Errorf("append %s: %w", r.Kind, ErrReservedKind))
		}
		return errcode.New(errcode.Validation, fmt.Errorf("append %q: %w", r.Kind, ErrUnknownKind))
	}
	if err := l.checkSpace(r.Kind); err != nil {
		return err
	}
	req := &request{rec: *r, done: make(chan error, 1), written: wait == waitWritten}
	if len(r.Input) > 0 {
		red, digest := Redact(r.Input)
		if l.cfg.MaxInputBytes > 0 && len(red) > l.cfg.MaxInputBytes {
			red = truncatedInput(red, l.cfg.MaxInputBytes)
		}
		req.rec.Input = red
		if req.rec.InputDigest == "" {
			req.rec.InputDigest = digest
		}
	}
	if r.Detail != nil { // the writer must own what it encodes
		req.rec.Detail = make(map[string]string, len(r.Detail))
		for k, v := range r.Detail {
			v = RedactString(v)
			if l.cfg.MaxInputBytes > 0 {
				v = TruncateDetail(v, l.cfg.MaxInputBytes)
			}
			req.rec.Detail[k] = v
		}
	}
	l.preparing.Add(1)
	enqueued := false
	defer func() {
		if !enqueued {
			l.preparing.Add(-1)
		}
	}()
	body, err := encodeBody(&req.rec, true) // Input is Redact's output
	if err != nil {
		return errcode.New(errcode.Validation, err)
	}
	if err := l.chargeOwner(r, len(body)); err != nil {
		return err
	}
	req.body = body
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return errcode.New(errcode.AuditUnavailable, ErrClosed)
	}
	if wait == waitNone {
		l.queuedMu.Lock()
		first := len(l.queued) == 0
		l.queued = append(l.queued, req)
		l.queuedMu.Unlock()
		enqueued = true
		l.preparing.Add(-1)
		l.mu.RUnlock()
		if first {
			l.queueTimer.Reset(queuedHold)
		}
		if !l.healthy.Load() {
			return errcode.Msg(errcode.AuditUnavailable, "audit log unwritable")
		}
		return nil
	}
	if wait == waitWritten && l.writeNow(req) {
		enqueued = true
		l.preparing.Add(-1)
		l.mu.RUnlock()
		return l.answered(ctx, r, req)
	}
	select {
	case l.reqs <- req:
		enqueued = true
		l.preparing.Add(-1)
		l.mu.RUnlock()
	case <-ctx.Done():
		l.mu.RUnlock()
		return fmt.Errorf("audit append: %w", ctx.Err())
	}
	return l.answered(ctx, r, req)
}

// answered waits for req's answer and copies what the log set into r.
func (l *Log) answered(ctx context.Context, r *Record, req *request) error {
	select {
	case err := <-req.done:
		if err != nil {
			return err
		}
		r.V, r.Seq, r.Time, r.Prev, r.Hash = req.rec.V, req.rec.Seq, req.rec.Time, req.rec.Prev, req.rec.Hash
		r.Input, r.InputDigest = req.rec.Input, req.rec.InputDigest
		return nil
	case <-ctx.Done():
		// The record may still become durable; the caller just must not act on it.
		return fmt.Errorf("audit append: %w", ctx.Err())
	}
}

// Healthy reports whether the log takes records of new work: the last write attempt
// succeeded (it turns false when a write fails and true again once a write or the periodic
// probe succeeds) and the volume is not short of space (Config.MinFreeBytes).
func (l *Log) Healthy() bool { return l.healthy.Load() && !l.spaceLow.Load() }

// PublicKey is the checkpoint verification key.
func (l *Log) PublicKey() ed25519.PublicKey { return l.key.Public().(ed25519.PublicKey) }

// MaxDetailBytes is how long a detail value may be before the log cuts it (0: no bound):
// a writer with a value that must stay whole (JSON) leaves out a longer one instead.
func (l *Log) MaxDetailBytes() int { return l.cfg.MaxInputBytes }

// Dir is the log directory (for Verify/Query/Tail on the live log).
func (l *Log) Dir() string { return l.cfg.Dir }

// Checkpoint writes a signed checkpoint now (if records came since the last one) and
// publishes it as the head, so a verify right after covers every record so far.
func (l *Log) Checkpoint(ctx context.Context) error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	done := make(chan error, 1)
	select {
	case l.cps <- done:
	case <-ctx.Done():
		l.mu.RUnlock()
		return ctx.Err()
	}
	l.mu.RUnlock()
	select {
	case err := <-done:
		if err == nil {
			l.heads.flush()
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close writes what is queued, a final signed checkpoint, and stops the writer. Appends after
// Close fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.quit)
	<-l.done
	l.queueTimer.Stop()
	l.syncTimer.Stop()
	l.heads.close()
	if l.fwd != nil {
		l.fwd.close()
	}
	err := l.w.f.Close()
	if !l.healthy.Load() {
		return errcode.New(errcode.AuditUnavailable, errors.New("audit log closed unhealthy: last records may be missing"))
	}
	if err != nil {
		return fmt.Errorf("close audit file: %w", err)
	}
	return nil
}
