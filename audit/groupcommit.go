package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/durable"
	"github.com/sandboxd/sandboxd/internal/errcode"
)

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
	// wmu is held from each wake-up until the next wait (see writeNow).
	l.wmu.Lock()
	defer l.wmu.Unlock()
	for {
		l.held = len(batch)
		l.wmu.Unlock()
		var req *request
		var syncErr error
		var cpDone chan error
		var which int
		select {
		case req = <-l.reqs:
			which = wakeRequest
		case syncErr = <-l.syncDone:
			which = wakeSynced
		case <-l.syncTimer.C:
			which = wakeSyncTimer
		case <-l.queueTimer.C:
			which = wakeQueueTimer
		case <-tick.C:
			which = wakeTick
		case cpDone = <-l.cps:
			which = wakeCheckpoint
		case <-l.quit:
			which = wakeQuit
		}
		l.wmu.Lock()
		switch which {
		case wakeRequest:
			l.receive(&batch, req)
			l.drain(&batch)
			if l.inflight && len(batch) < l.cfg.maxBatch && !anyWritten(batch) {
				continue
			}
			l.gather(&batch, 0)
			flush()
			l.startSync()
		case wakeSynced:
			// Under load, wake this sync's waiters first and give them a moment to come
			// back (gather) before the next sync: otherwise each sync carries only the
			// writers that were not in the previous one, and batches settle at half the
			// writers. A light load (few waiters woken) never waits, and neither does a
			// load whose woken writers did not come back last time (a daemon's calls go
			// off to run their tool): like a database's commit delay, the pause only pays
			// when many commit at once, again and again.
			done := l.endSync(syncErr)
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
		case wakeSyncTimer:
			l.syncArmed, l.syncDue = false, true
			l.startSync()
		case wakeQueueTimer:
			l.takeQueued(&batch)
			flush()
		case wakeTick:
			l.takeQueued(&batch)
			flush()
			l.periodic()
		case wakeCheckpoint:
			l.takeQueued(&batch)
			flush()
			if l.w.sinceCP > 0 || len(l.w.pending) > 0 {
				l.commit(nil, true)
			}
			l.flushSync()
			if !l.healthy.Load() {
				cpDone <- errcode.Msg(errcode.AuditUnavailable, "audit log unwritable: checkpoint not written")
			} else {
				cpDone <- nil
			}
		case wakeQuit:
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

// What woke the writer goroutine.
const (
	wakeRequest = iota
	wakeSynced
	wakeSyncTimer
	wakeQueueTimer
	wakeTick
	wakeCheckpoint
	wakeQuit
)

// writeNow writes req, an AppendWritten's record, on the caller's goroutine when the writer is
// idle and nothing is waiting for it, and answers it: handing it to the writer goroutine and
// back costs two goroutine wake-ups, on a small host a good part of a decision's latency.
//
// It reports false, having done nothing, when the record must go the writer's way: the writer
// is busy, has requests waiting, or holds some for the next sync (taken in first, they may
// include this caller's Enqueued records); or a rotation is due, or a failed write or sync
// must be repaired first. Those may wait on the fsync goroutine, which only the writer
// goroutine may do: the caller holds wmu, and the writer goroutine may be the one that takes
// the sync's result (syncDone) and then waits for wmu.
func (l *Log) writeNow(req *request) bool {
	if l.cfg.maxBatch == 1 || !l.wmu.TryLock() {
		return false
	}
	defer l.wmu.Unlock()
	if len(l.reqs) > 0 || l.held > 0 || l.syncBroke || l.w.dirty || l.rotationDue(time.Now().UTC()) {
		return false
	}
	batch := []*request{}
	l.takeQueued(&batch) // an Enqueued record goes before any later one of its caller's
	batch = append(batch, req)
	l.write(batch, false)
	l.startSync()
	l.answerWritten()
	return true
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
	// Short of space, calls are refused before they make a record that would look again:
	// the tick does, so freeing space is seen. A write that works again after a failure looks
	// too: the write may have failed for want of space the repair then gave back.
	if l.spaceLow.Load() {
		l.refreshSpace()
	}
	if !l.healthy.Load() {
		if len(l.w.pending) > 0 {
			l.commit(nil, false)
		} else if err := l.probe(); err == nil {
			l.refreshSpace()
			l.setHealthy(true, nil)
		}
		return
	}
	if l.w.sinceCP > 0 && time.Since(l.w.lastCP) >= l.cfg.CheckpointInterval {
		l.commit(nil, true)
	}
}

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

// writtenSyncDelay bounds how long a record whose writer did not wait for durability (a
// call's end, a proxied request's net.connect) may sit written but not synced: usually the next
// durable record's fsync covers it well before. An fsync per such record would cost the CPUs a
// busy proxy or a paced agent needs, for a window a power cut could still hit.
const writtenSyncDelay = 20 * time.Millisecond

// startSync begins an fsync of what was written since the last one began, unless one is in
// flight (then synced starts the next) or nothing written needs it yet (then syncTimer does).
func (l *Log) startSync() {
	if l.inflight {
		return
	}
	if !l.waiting.written {
		l.syncDue = false
		return
	}
	if len(l.waiting.reqs) == 0 && len(l.waiting.cps) == 0 && !l.syncDue {
		if !l.syncArmed {
			l.syncArmed = true
			l.syncTimer.Reset(writtenSyncDelay)
		}
		return
	}
	l.syncDue = false
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
		l.heads.publish(Head{V: headVersion, Seq: cp.rec.Seq, Hash: cp.rec.Hash, Time: cp.rec.Time, File: cp.file,
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
			l.syncDue = true
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
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		// The volume is full now, whatever the last look at it said: engage the free-space
		// floor at once. A smaller record may still fit and make the log healthy again, and
		// calls must not go on filling the last bytes until the next look.
		l.refreshSpace()
	}
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
	h.Sig = signHead(l.key, h.Seq, h.Hash)
	b, _ := json.Marshal(h)
	if err := durable.WriteFile(filepath.Join(l.cfg.Dir, headFile), append(b, '\n')); err != nil {
		l.log.Warn("audit head not updated", zap.String("code", string(Classify(err))))
	}
}
