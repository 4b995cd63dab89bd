package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

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
	case c.MaxFileBytes < 0, c.MaxFileAge < 0, c.Retain < 0, c.RetainAge < 0, c.MinRetainAge < 0, c.MaxInputBytes < 0, c.MinFreeBytes < 0,
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

	w     writer // owned by the writer goroutine (and Open before it starts)
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
	// gathered is what the gather in progress has written so far; gatherBackoff how many
	// more syncs skip the post-sync gather, gatherPenalty the last backoff. Owned by the
	// writer goroutine.
	gathered      int
	gatherBackoff int
	gatherPenalty int
	written       []*request // written by write, answered by answerWritten
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
	if err := secureDir(cfg.Dir); err != nil {
		return nil, err
	}
	if err := secureDir(cfg.KeyDir); err != nil {
		return nil, err
	}
	key, err := loadOrCreateKey(cfg.KeyDir)
	if err != nil {
		return nil, err
	}
	l.key = key
	if err := l.recover(); err != nil {
		return nil, err
	}
	l.heads = newHeadWriter(l.writeHead)
	l.healthy.Store(true)
	if len(l.w.pending) > 0 {
		l.commit(nil, false)
		l.flushSync()
	}
	if cfg.SyslogAddr != "" {
		l.fwd = newForwarder(cfg.SyslogAddr, cfg.SyslogApp, cfg.SyslogOCSF, l.log)
	}
	go l.run()
	return l, nil
}

// recover finds the chain head and makes the newest file end in a complete record, moving any
// torn bytes aside (see DESIGN note in doc of tornAside).
func (l *Log) recover() error {
	files, err := ListFiles(l.cfg.Dir)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	l.w.lastCP = now
	if len(files) == 0 {
		return l.openFile(fileName(1), now)
	}
	cur := files[len(files)-1]
	last, good, tail, first, err := lastLine(cur)
	if err != nil {
		return err
	}
	var torn *Record
	if len(tail) > 0 {
		if torn, err = l.tornAside(cur, good, tail); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(cur, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open audit file: %w", err)
	}
	l.w.f, l.w.name, l.w.off = f, filepath.Base(cur), good
	l.w.started = now
	if first != nil {
		if r, err := parseLine(first); err == nil {
			l.w.started = r.Time
		}
	}
	if last == nil && len(files) > 1 {
		// A rotation created this file and crashed before its first record was durable: chain
		// from the previous file and write the rotate record that was lost.
		prev := files[len(files)-2]
		if last, _, _, _, err = lastLine(prev); err != nil {
			return err
		}
		if last == nil {
			return fmt.Errorf("%s is empty: %w", filepath.Base(prev), ErrCorrupt)
		}
		r, err := parseLine(last)
		if err != nil {
			return fmt.Errorf("last record of %s: %w: %w", filepath.Base(prev), ErrCorrupt, err)
		}
		l.w.seq, l.w.hash = r.Seq, r.Hash
		l.w.pending = append(l.w.pending, rotateRecord(filepath.Base(prev), r))
	} else if last != nil {
		r, err := parseLine(last)
		if err != nil {
			return fmt.Errorf("last record of %s: %w: %w", l.w.name, ErrCorrupt, err)
		}
		l.w.seq, l.w.hash = r.Seq, r.Hash
	}
	if torn != nil {
		l.w.pending = append(l.w.pending, torn)
	}
	return nil
}

// tornAside handles an incomplete last line. Choice: the torn bytes are copied to
// "<file>.torn-<offset>" (0600, fsynced) and the log file is truncated to its last complete
// record, so every log file stays pure JSON lines that Verify and Query read without special
// cases. Nothing is lost: the audit.torn_tail record names the side file, the byte count and
// the SHA-256 of the torn bytes, and the chain continues from the last good record. No append
// can have returned nil for the torn bytes: a record is acknowledged only once its whole line,
// newline included, is in the file (AppendWritten) or fsynced (Append).
func (l *Log) tornAside(path string, good int64, tail []byte) (*Record, error) {
	aside := fmt.Sprintf("%s%s%d", path, tornInfix, good)
	f, err := createExcl(aside, os.O_WRONLY)
	if err != nil {
		return nil, err
	}
	_, err = f.Write(tail)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("save torn tail: %w", err)
	}
	if err := syncDir(l.cfg.Dir); err != nil {
		return nil, err
	}
	if err := os.Truncate(path, good); err != nil {
		return nil, fmt.Errorf("truncate torn tail: %w", err)
	}
	sum := sha256.Sum256(tail)
	l.log.Warn("audit log had a torn last line; moved aside", zap.String("file", filepath.Base(path)),
		zap.Int64("offset", good), zap.Int("bytes", len(tail)))
	return &Record{Kind: KindTornTail, Detail: map[string]string{
		"file":   filepath.Base(path),
		"offset": strconv.FormatInt(good, 10),
		"bytes":  strconv.Itoa(len(tail)),
		"sha256": hex.EncodeToString(sum[:]),
		"aside":  filepath.Base(aside),
	}}, nil
}

func rotateRecord(prevFile string, last *Record) *Record {
	return &Record{Kind: KindRotate, Detail: map[string]string{
		"prev_file": prevFile,
		"prev_seq":  strconv.FormatUint(last.Seq, 10),
		"prev_hash": last.Hash,
	}}
}

func (l *Log) openFile(name string, now time.Time) error {
	f, err := createExcl(filepath.Join(l.cfg.Dir, name), os.O_WRONLY)
	if err != nil {
		return err
	}
	if err := syncDir(l.cfg.Dir); err != nil {
		f.Close()
		return err
	}
	if l.w.f != nil {
		l.w.f.Close()
	}
	l.w.f, l.w.name, l.w.off, l.w.started, l.w.dirty = f, name, 0, now, false
	return nil
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
				v = truncatedDetail(v, l.cfg.MaxInputBytes)
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
	select {
	case l.reqs <- req:
		enqueued = true
		l.preparing.Add(-1)
		l.mu.RUnlock()
	case <-ctx.Done():
		l.mu.RUnlock()
		return fmt.Errorf("audit append: %w", ctx.Err())
	}
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

// Healthy reports whether the last write attempt succeeded. It turns false when a write fails
// and true again once a write or the periodic probe succeeds.
func (l *Log) Healthy() bool { return l.healthy.Load() }

// PublicKey is the checkpoint verification key.
func (l *Log) PublicKey() ed25519.PublicKey { return l.key.Public().(ed25519.PublicKey) }

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

func (l *Log) run() {
	defer close(l.done)
	tickEvery := min(probeInterval, l.cfg.CheckpointInterval)
	tick := time.NewTicker(max(tickEvery, 10*time.Millisecond))
	defer tick.Stop()
	// batch holds requests not yet written: while an fsync is in flight, durable-only
	// requests gain nothing from being written at once (that sync cannot cover them), so they
	// wait and go out together when it returns — the group commit.
	batch := make([]*request, 0, l.cfg.maxBatch)
	flush := func() {
		if len(batch) > 0 {
			l.commit(batch, false)
			batch = batch[:0]
		}
	}
	for {
		select {
		case req := <-l.reqs:
			l.receive(&batch, req)
			l.drain(&batch)
			if l.inflight && len(batch) < l.cfg.maxBatch && !anyWritten(batch) {
				continue
			}
			l.gather(&batch, 0)
			flush()
			l.startSync()
		case err := <-l.syncDone:
			// Under load, wake this sync's waiters first and give them a moment to come
			// back (gather) before the next sync: otherwise each sync carries only the
			// writers that were not in the previous one, and batches settle at half the
			// writers. A light load (few waiters woken) never waits, and neither does a
			// load whose woken writers did not come back last time (a daemon's calls go
			// off to run their tool): like a database's commit delay, the pause only pays
			// when many commit at once, again and again.
			done := l.endSync(err)
			l.answer(done)
			switch {
			case len(done.reqs) < gatherSiblings:
			case l.gatherBackoff > 0:
				l.gatherBackoff--
			default:
				if back := l.gather(&batch, len(batch)+len(done.reqs)); 4*back < len(done.reqs) {
					// They did not come back: skip the next syncs' gathers, twice as many each
					// time in a row, up to maxGatherBackoff.
					l.gatherPenalty = min(max(2*l.gatherPenalty, 2), maxGatherBackoff)
					l.gatherBackoff = l.gatherPenalty
				} else {
					l.gatherPenalty = 0
				}
			}
			flush()
			l.startSync()
		case <-l.queueTimer.C:
			l.takeQueued(&batch)
			flush()
		case <-tick.C:
			l.takeQueued(&batch)
			flush()
			l.periodic()
		case done := <-l.cps:
			l.takeQueued(&batch)
			flush()
			if l.w.sinceCP > 0 || len(l.w.pending) > 0 {
				l.commit(nil, true)
			}
			l.flushSync()
			if !l.healthy.Load() {
				done <- errcode.Msg(errcode.AuditUnavailable, "audit log unwritable: checkpoint not written")
			} else {
				done <- nil
			}
		case <-l.quit:
			// Close set closed under mu, so no sender is left; flush what they queued.
			for {
				l.takeQueued(&batch)
				l.drain(&batch)
				if len(batch) == 0 {
					break
				}
				flush()
			}
			if l.w.sinceCP > 0 || len(l.w.pending) > 0 {
				l.commit(nil, true)
			}
			l.flushSync()
			return
		}
	}
}

// queuedHold bounds how long an Enqueued record waits for a request with a waiter.
const queuedHold = 2 * time.Millisecond

// receive adds req to the batch, after the queued records: anything Enqueued before req was
// sent is taken first, so a call's start always precedes its end.
func (l *Log) receive(batch *[]*request, req *request) {
	l.takeQueued(batch)
	*batch = append(*batch, req)
}

func (l *Log) takeQueued(batch *[]*request) {
	l.queuedMu.Lock()
	*batch = append(*batch, l.queued...)
	clear(l.queued)
	l.queued = l.queued[:0]
	l.queuedMu.Unlock()
}

func anyWritten(batch []*request) bool {
	for _, r := range batch {
		if r.written {
			return true
		}
	}
	return false
}

func (l *Log) drain(batch *[]*request) {
	for len(*batch) < l.cfg.maxBatch {
		select {
		case r := <-l.reqs:
			l.receive(batch, r)
		default:
			return
		}
	}
}

// groupWait bounds how long a batch waits for Appends still being prepared. Callers woken by
// the previous commit need a few µs each to build their next record; without this wait the
// writer fsyncs the first one or two alone and the rest wait a whole extra fsync.
const groupWait = 200 * time.Microsecond

// gatherChunk is how many gathered records are written before the gather ends.
const gatherChunk = 16

// gatherSiblings is how many waiters a returning sync must wake for the writer to wait for
// them to come back.
const gatherSiblings = 8

// maxGatherBackoff bounds how many syncs skip the post-sync gather after gathers in which
// fewer than a quarter of the woken writers came back.
const maxGatherBackoff = 64

// gather waits (at most groupWait) for Appends being prepared and until the batch, with what
// it wrote meanwhile, holds target records, and returns how many joined: the writers just
// woken by a sync may not have re-entered Append yet, and a batch cut short costs each of
// them a whole fsync. One writer makes batches of one, so it never waits.
func (l *Log) gather(batch *[]*request, target int) (joined int) {
	want := func() bool {
		return (l.preparing.Load() > 0 || len(*batch)+l.gathered < target) && len(*batch)+l.gathered < l.cfg.maxBatch
	}
	l.gathered = 0
	start := len(*batch)
	defer func() { joined = len(*batch) + l.gathered - start }()
	if !want() {
		return
	}
	t := time.NewTimer(groupWait)
	defer t.Stop()
	for want() {
		select {
		case r := <-l.reqs:
			l.receive(batch, r)
			l.drain(batch)
			// Write what has come while waiting for the rest: the hashing and the write
			// then overlap the stragglers' preparation instead of following it.
			if len(*batch) >= gatherChunk && !l.inflight {
				l.gathered += len(*batch)
				l.write(*batch, false)
				l.answerWritten()
				*batch = (*batch)[:0]
			}
		case <-t.C:
			return
		}
	}
	return
}

func (l *Log) periodic() {
	if !l.healthy.Load() {
		if len(l.w.pending) > 0 {
			l.commit(nil, false)
		} else if err := l.probe(); err == nil {
			l.setHealthy(true, nil)
		}
		return
	}
	if l.w.sinceCP > 0 && time.Since(l.w.lastCP) >= l.cfg.CheckpointInterval {
		l.commit(nil, true)
	}
}

// probeBytes is what the probe writes: room for a burst of records, not just one page. A full
// disk's repair frees the page or two a failed write took, and a 4 KB probe then reported the
// log healthy while the next call failed again.
const probeBytes = 64 << 10

// probe checks that the directory takes a probeBytes fsynced write again (and repairs a pending
// truncation), so Healthy recovers without waiting for the next Append.
func (l *Log) probe() error {
	if err := l.repair(); err != nil {
		return err
	}
	path := filepath.Join(l.cfg.Dir, probeFile)
	_ = os.Remove(path)
	f, err := createExcl(path, os.O_WRONLY)
	if err != nil {
		return err
	}
	defer os.Remove(path)
	defer f.Close()
	if _, err := f.Write(make([]byte, probeBytes)); err != nil {
		return err
	}
	return unix.Fdatasync(int(f.Fd()))
}

// repair truncates the file back to the last durable record after a failed write, so no half
// line is ever chained over.
func (l *Log) repair() error {
	if l.syncBroke {
		l.flushSync()
		if err := unix.Fdatasync(int(l.w.f.Fd())); err != nil {
			return fmt.Errorf("sync after a failed sync: %w", err)
		}
		l.syncBroke = false
	}
	if !l.w.dirty {
		return nil
	}
	if err := l.w.f.Truncate(l.w.off); err != nil {
		return fmt.Errorf("truncate after failed write: %w", err)
	}
	if err := unix.Fdatasync(int(l.w.f.Fd())); err != nil {
		return fmt.Errorf("sync after truncate: %w", err)
	}
	l.w.dirty = false
	return nil
}

func (l *Log) rotateIfDue(now time.Time) error {
	if l.w.off == 0 {
		return nil
	}
	if l.w.off < l.cfg.MaxFileBytes && now.Sub(l.w.started) < l.cfg.MaxFileAge {
		return nil
	}
	// Everything written to the old file is synced before the writer moves on from it.
	l.flushSync()
	if l.syncBroke {
		return errors.New("audit file not synced before rotation")
	}
	prev := l.w.name
	last := &Record{Seq: l.w.seq, Hash: l.w.hash}
	if err := l.openFile(fileName(l.w.seq+1), now); err != nil {
		return err
	}
	l.w.pending = append([]*Record{rotateRecord(prev, last)}, l.w.pending...)
	l.rotations.Add(1)
	l.prune()
	return nil
}

// Rotations counts the rotations since Open: a writer that states something once per file
// (the rule sets a replay needs) states it again when this changes, so retention cannot
// leave a file's records without it.
func (l *Log) Rotations() uint64 { return l.rotations.Load() }

// commit writes the batch (write) and starts an fsync for it.
func (l *Log) commit(batch []*request, forceCP bool) {
	l.write(batch, forceCP)
	// The sync starts before the written-only waiters are woken: a woken caller then runs
	// next on this P, rather than queueing behind the goroutine that blocks in fdatasync.
	l.startSync()
	l.answerWritten()
	if l.cfg.maxBatch == 1 {
		// The benchmark's fsync-per-record baseline: every commit waits for its own sync.
		l.flushSync()
	}
}

// write writes pending log records, the batch and a checkpoint if due, in one write; answers
// the written-only waiters at once and leaves the others to the next fsync (startSync).
func (l *Log) write(batch []*request, forceCP bool) {
	now := time.Now().UTC()
	if err := l.repair(); err != nil {
		l.fail(batch, err)
		return
	}
	if err := l.rotateIfDue(now); err != nil {
		l.fail(batch, err)
		return
	}
	w := &l.w
	seq, prev := w.seq, w.hash
	line := w.line[:0]
	add := func(r *Record, body []byte) {
		r.V, r.Seq, r.Time, r.Prev = Version, seq+1, time.Now().UTC(), prev
		line, r.Hash = appendLine(line, r.Seq, r.Time, body, prev)
		seq, prev = r.Seq, r.Hash
	}
	addOwn := func(r *Record) {
		body, err := encodeBody(r, false)
		if err != nil {
			panic(err) // log-built records are plain strings: they always encode
		}
		add(r, body)
	}
	for _, r := range w.pending {
		addOwn(r)
	}
	ok := batch
	for _, req := range batch {
		add(&req.rec, req.body)
	}
	n := len(w.pending) + len(ok)
	var cp *Record
	if (forceCP && (w.sinceCP+n > 0)) || w.sinceCP+n >= l.cfg.CheckpointEvery {
		cp = &Record{Kind: KindCheckpoint, Detail: map[string]string{
			"signed_seq":  strconv.FormatUint(seq, 10),
			"signed_hash": prev,
			"key":         KeyID(l.PublicKey()),
			"sig":         sign(l.key, seq, prev),
		}}
		addOwn(cp)
	}
	w.line = line
	if len(line) == 0 {
		return
	}
	_, err := w.f.WriteAt(line, w.off)
	if err != nil {
		// Part of the batch may be in the file (a short write): cut it off before anything
		// else is written, so the chain resumes at the last complete record.
		w.dirty = true
		if rerr := l.repair(); rerr != nil {
			l.log.Warn("audit truncate after failed write", zap.String("code", string(Classify(rerr))))
		}
		l.fail(ok, err)
		return
	}
	w.off += int64(len(line))
	w.seq, w.hash = seq, prev
	w.sinceCP += n
	if cp != nil {
		w.sinceCP, w.lastCP = 0, now
		// The head is published only once the checkpoint is on disk.
		l.waiting.cps = append(l.waiting.cps, headCP{rec: cp, file: w.name})
	}
	if l.fwd != nil {
		for _, r := range w.pending {
			l.fwd.send(r)
		}
	}
	w.pending = nil
	l.waiting.written = true
	for _, req := range ok {
		if l.fwd != nil {
			l.fwd.send(&req.rec)
		}
		if req.written {
			l.written = append(l.written, req)
		} else {
			l.waiting.reqs = append(l.waiting.reqs, req)
		}
	}
	if cp != nil && l.fwd != nil {
		l.fwd.send(cp)
	}
}

// answerWritten wakes the written-only waiters of the last writes.
func (l *Log) answerWritten() {
	for _, req := range l.written {
		req.done <- nil
	}
	clear(l.written)
	l.written = l.written[:0]
}

// startSync begins an fsync of what was written since the last one began, unless one is in
// flight (then synced starts the next).
func (l *Log) startSync() {
	if l.inflight || !l.waiting.written {
		return
	}
	l.inflight = true
	l.syncing, l.waiting = l.waiting, syncWait{}
	fd := int(l.w.f.Fd())
	l.syncs.Add(1)
	go func() { l.syncDone <- unix.Fdatasync(fd) }()
}

// synced answers the waiters of the fsync that returned and starts the next one.
func (l *Log) synced(err error) {
	l.answer(l.endSync(err))
	l.startSync()
}

// endSync takes the waiters of the fsync that returned. On failure it answers them (and those
// waiting on the next sync) with the error: the records stay in the file (some may have been
// answered as written), the log turns unhealthy, and repair syncs again before anything more
// is written.
func (l *Log) endSync(err error) syncWait {
	l.inflight = false
	done := l.syncing
	l.syncing = syncWait{}
	if err != nil {
		l.syncBroke = true
		l.fail(done.reqs, err)
		// Those waiting on the next sync are no better off: answer them now too.
		l.fail(l.waiting.reqs, err)
		l.waiting = syncWait{}
		return syncWait{}
	}
	if !l.syncBroke {
		l.setHealthy(true, nil)
	}
	return done
}

// answer tells the waiters of a successful fsync, and publishes its checkpoints as the head.
func (l *Log) answer(done syncWait) {
	for _, cp := range done.cps {
		l.heads.publish(Head{V: Version, Seq: cp.rec.Seq, Hash: cp.rec.Hash, Time: cp.rec.Time, File: cp.file,
			Key: KeyID(l.PublicKey())})
	}
	for _, req := range done.reqs {
		req.done <- nil
	}
}

// flushSync waits for the fsync in flight and runs the next, until everything written is on
// disk (or a sync failed): before a rotation, a checkpoint request and Close.
func (l *Log) flushSync() {
	for {
		if !l.inflight {
			l.startSync()
			if !l.inflight {
				return
			}
		}
		l.synced(<-l.syncDone)
	}
}

func (l *Log) fail(batch []*request, err error) {
	l.setHealthy(false, err)
	e := errcode.New(errcode.AuditUnavailable, fmt.Errorf("write audit log: %w", err))
	for _, req := range batch {
		req.done <- e
	}
}

func (l *Log) setHealthy(ok bool, err error) {
	if l.healthy.Swap(ok) == ok {
		return
	}
	if ok {
		l.log.Info("audit log writable again")
	} else {
		l.log.Error("audit log unavailable; calls are refused", zap.String("code", string(Classify(err))))
	}
}

// writeHead signs h and writes it as the head (on the head writer's goroutine). A failure
// leaves an older head, which still verifies; it is logged, not fatal.
func (l *Log) writeHead(h Head) {
	h.Sig = sign(l.key, h.Seq, h.Hash)
	b, _ := json.Marshal(h)
	if err := writeFileAtomic(filepath.Join(l.cfg.Dir, headFile), append(b, '\n')); err != nil {
		l.log.Warn("audit head not updated", zap.String("code", string(Classify(err))))
	}
}

// prune applies retention to rotated files (never the current one) and their torn side files.
func (l *Log) prune() {
	if l.cfg.Retain == 0 && l.cfg.RetainAge == 0 {
		return
	}
	files, err := ListFiles(l.cfg.Dir)
	if err != nil {
		return
	}
	var old []string
	for _, f := range files {
		if filepath.Base(f) != l.w.name {
			old = append(old, f)
		}
	}
	cut := 0
	if l.cfg.Retain > 0 && len(old)+1 > l.cfg.Retain {
		cut = len(old) + 1 - l.cfg.Retain
	}
	for i, f := range old {
		st, err := os.Stat(f)
		if err != nil || l.youngerThanRetention(st.ModTime()) {
			// Never a young record, whatever retain_files says: a flood of records must not
			// rotate another user's recent history away (issue 17). The volume's free space
			// check refuses new calls instead.
			continue
		}
		if i >= cut && (l.cfg.RetainAge == 0 || time.Since(st.ModTime()) < l.cfg.RetainAge) {
			continue
		}
		side, _ := filepath.Glob(f + tornInfix + "*")
		for _, p := range append(side, f) {
			if err := os.Remove(p); err != nil {
				l.log.Warn("audit retention", zap.String("code", string(Classify(err))))
			}
		}
		l.log.Info("audit file removed by retention", zap.String("file", filepath.Base(f)))
	}
}
