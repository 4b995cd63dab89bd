package executor

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/session"
)

// MaxImageBytes caps an image a tool returns inline (Read of an image, Bash printing one):
// 3.75 MiB, whose base64 is the 5 MB the Messages API takes per image, the bound the agents
// resize to. A larger image is refused with a message naming the cap, never base64'd into
// the daemon's memory (issue 17: 150 Reads of a 6 MB PNG grew the daemon by 4 GiB).
const MaxImageBytes = 3840 << 10

// base64Slice is how much of an image base64Yielding encodes between yields: ~0.1 ms of work.
const base64Slice = 96 << 10

// base64Yielding is b in standard base64, encoded a slice at a time with a yield to the
// scheduler between slices. The daemon runs Go on one P: a batch of images encoded each in
// one go held it for milliseconds at a stretch, and every other user's ready requests waited
// behind them (Go preempts a running goroutine only after 10 ms), which doubled the p99 of a
// well-behaved tenant while another read images (sbbench load, two-tenant row).
func base64Yielding(b []byte) string {
	var out strings.Builder
	out.Grow(base64.StdEncoding.EncodedLen(len(b)))
	enc := base64.NewEncoder(base64.StdEncoding, &out)
	for i := 0; i < len(b); i += base64Slice {
		_, _ = enc.Write(b[i:min(len(b), i+base64Slice)]) // a strings.Builder does not fail
		runtime.Gosched()
	}
	_ = enc.Close()
	return out.String()
}

// Defaults of Limits' zero fields: the same safe values as config.Default.
const (
	defaultPersistedBytesPerUser = 1 << 30
	defaultTasksPerUser          = 32
	defaultTaskMaxLifetime       = time.Hour
)

// Limits are the per-user bounds the tools enforce. Zero fields take the defaults above.
type Limits struct {
	// PersistedBytesPerUser bounds the persisted results one uid holds; past it its oldest go.
	PersistedBytesPerUser int64
	// TasksPerUser bounds the running background tasks of one uid.
	TasksPerUser int
	// TaskMaxLifetime is how long a background task may run before it is killed.
	TaskMaxLifetime time.Duration
	// VolumeReserveBytes is free space of the state volume that saved results never take
	// (0: no reserve). The audit log lives there and refuses every user's calls when the
	// volume runs low, so one user's results must stop well before it does.
	VolumeReserveBytes int64
}

// SetLimits swaps in the per-user limits (at start and on reload).
func (h *Host) SetLimits(l Limits) { h.limitsV.Store(&l) }

func (h *Host) limits() Limits {
	l := Limits{}
	if p := h.limitsV.Load(); p != nil {
		l = *p
	}
	if l.PersistedBytesPerUser <= 0 {
		l.PersistedBytesPerUser = defaultPersistedBytesPerUser
	}
	if l.TasksPerUser <= 0 {
		l.TasksPerUser = defaultTasksPerUser
	}
	if l.TaskMaxLifetime <= 0 {
		l.TaskMaxLifetime = defaultTaskMaxLifetime
	}
	return l
}

// errPersistedTooLarge: one output is more than its owner may keep at all.
var errPersistedTooLarge = errors.New("output larger than limits.persisted_bytes_per_user")

// persistLedger counts each uid's persisted result files, oldest first. The daemon writes
// them as root, so disk quotas do not apply: this is the only bound (issue 17).
type persistLedger struct {
	mu    sync.Mutex
	users map[uint32]*userFiles
}

type userFiles struct {
	total int64
	files []persistedFile // oldest first
	// inflight is what the owner's running commands have spilled so far (reserve): on disk
	// already, though no file is finished to count.
	inflight int64
}

type persistedFile struct {
	path    string
	session string
	size    int64
}

// errStateVolumeLow: saving this much would eat into the state volume's reserve.
var errStateVolumeLow = errors.New("the state volume is short of space, and what is left is kept for the audit log")

// roomFor refuses n more bytes of saved results when the state volume would then have less
// than Limits.VolumeReserveBytes free. Every user's results count against one volume, so the
// per-user bound alone (persisted_bytes_per_user) lets one user fill it, and the audit log
// then refuses everyone's calls. A volume whose space cannot be read is let be: the write
// itself then fails, or not.
func (h *Host) roomFor(n int64) error {
	reserve := h.limits().VolumeReserveBytes
	if reserve <= 0 || h.StateDir == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(h.StateDir, &st); err != nil {
		return nil
	}
	// Bfree: what root (the daemon, which writes the results and the log) may still write.
	if free := int64(st.Bfree) * int64(st.Bsize); free-n < reserve {
		return errcode.New(errcode.ErrnoENOSPC, errStateVolumeLow)
	}
	return nil
}

// account records a finished result file of s's owner and removes the owner's oldest files
// until the owner is within limit. A file larger than limit on its own is removed and
// refused: evicting everything else would still not make room.
func (h *Host) account(s *session.Session, path string, size int64) error {
	limit := h.limits().PersistedBytesPerUser
	if size > limit {
		_ = os.Remove(path)
		return errcode.New(errcode.TooLarge, fmt.Errorf("%w: this output is %s and one user may keep at most %s of saved results; narrow the command's output",
			errPersistedTooLarge, humanBytes(size), humanBytes(limit)))
	}
	l := &h.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	uf := l.user(s.Owner.Tenant())
	// Results are content-addressed: an identical one reuses the file, so count it once
	// and make it the newest.
	for i, f := range uf.files {
		if f.path == path {
			uf.files = append(uf.files[:i], uf.files[i+1:]...)
			uf.total -= f.size
			break
		}
	}
	uf.files = append(uf.files, persistedFile{path: path, session: s.ID, size: size})
	uf.total += size
	h.evict(uf, limit, 1)
	return nil
}

// user is uid's entry, made on first use; l.mu is held.
func (l *persistLedger) user(uid uint32) *userFiles {
	if l.users == nil {
		l.users = map[uint32]*userFiles{}
	}
	uf := l.users[uid]
	if uf == nil {
		uf = &userFiles{}
		l.users[uid] = uf
	}
	return uf
}

// evict removes uf's oldest files, keeping at least keep, until its files and what is in
// flight fit limit; the ledger's lock is held.
func (h *Host) evict(uf *userFiles, limit int64, keep int) {
	for uf.total+uf.inflight > limit && len(uf.files) > keep {
		old := uf.files[0]
		uf.files = uf.files[1:]
		uf.total -= old.size
		if err := os.Remove(old.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			h.logger().Warn("remove an evicted persisted result: " + string(errcode.Of(err)))
		}
	}
}

// errSpillOverLimit: the owner's running commands' output would not fit
// persisted_bytes_per_user even with every saved result evicted.
var errSpillOverLimit = errors.New("the output of this user's running commands is over limits.persisted_bytes_per_user")

// reserve counts n more bytes a running command of s's owner is about to spill, evicting the
// owner's oldest saved results to make room, or refuses when even that cannot: spill files
// are written as root, so without this a user's concurrent commands and tasks could fill the
// state disk many times past the limit before any of them finished.
func (h *Host) reserve(s *session.Session, n int64) error {
	if err := h.roomFor(n); err != nil {
		return err
	}
	limit := h.limits().PersistedBytesPerUser
	l := &h.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	uf := l.user(s.Owner.Tenant())
	if uf.inflight+n > limit {
		// Not even with every saved result gone: refuse before evicting any.
		return errcode.New(errcode.TooLarge, errSpillOverLimit)
	}
	uf.inflight += n
	h.evict(uf, limit, 0)
	return nil
}

// unreserve gives back n bytes reserve counted, once their file is accounted or removed.
func (h *Host) unreserve(s *session.Session, n int64) {
	l := &h.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	if uf := l.users[s.Owner.Tenant()]; uf != nil {
		uf.inflight -= n
		if len(uf.files) == 0 && uf.inflight == 0 {
			delete(l.users, s.Owner.Tenant())
		}
	}
}

// forgetSession drops the ledger entries of a session whose results directory is removed.
func (l *persistLedger) forgetSession(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, uf := range l.users {
		kept := uf.files[:0]
		for _, f := range uf.files {
			if f.session == id {
				uf.total -= f.size
				continue
			}
			kept = append(kept, f)
		}
		uf.files = kept
		if len(uf.files) == 0 && uf.inflight == 0 {
			delete(l.users, uid)
		}
	}
}

// PersistedBytes is what uid's persisted results take now (for tests and metrics).
func (h *Host) PersistedBytes(uid uint32) int64 {
	l := &h.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	if uf := l.users[uid]; uf != nil {
		return uf.total
	}
	return 0
}

// ResponseSize estimates what o adds to a response body: its text and image bytes, its
// data's strings and its messages. JSON escaping aside, the body is this plus a few hundred
// bytes.
func ResponseSize(o *Outcome) int64 {
	if o == nil || o.Result == nil {
		return 512
	}
	n := int64(512)
	for _, b := range o.Result.Content {
		n += int64(len(b.Text) + len(b.Data))
	}
	for _, m := range o.Result.ExtraMessages {
		n += int64(len(m))
	}
	return n + anySize(o.Result.Data)
}

func anySize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x))
	case map[string]any:
		var n int64
		for k, e := range x {
			n += int64(len(k)) + anySize(e)
		}
		return n
	case []any:
		var n int64
		for _, e := range x {
			n += anySize(e)
		}
		return n
	case []map[string]any:
		var n int64
		for _, e := range x {
			n += anySize(e)
		}
		return n
	}
	return 8
}

// Shrink makes o small enough to go out in a response that is out of room (limits.response_bytes):
// its text is saved for the session owner and replaced by a preview and the path, like any
// oversize output, and its images are left out with a note saying to read them in a request
// of their own. The data's long strings (Bash's stdout copy) go too. If the text cannot be
// saved the result becomes an error saying why.
func (h *Host) Shrink(s *session.Session, o *Outcome, limit int64) {
	if o == nil || o.Result == nil {
		return
	}
	r := o.Result
	why := fmt.Sprintf("this response already carries its limit of %s (limits.response_bytes)", humanBytes(limit))
	text := joinText(r)
	var blocks []Block
	images := 0
	for _, b := range r.Content {
		if b.Type == "image" {
			images++
		}
	}
	if len(text) > PreviewChars {
		path, err := h.persistText(s, text)
		if err != nil {
			o.Result = &Result{IsError: true, Content: []Block{{Type: "text", Text: fmt.Sprintf("result left out: %s and it could not be saved (%v); repeat the call in a request of its own", why, err)}}}
			o.Err = errcode.New(errcode.TooLarge, fmt.Errorf("result left out: %s", why))
			return
		}
		blocks = append(blocks, Block{Type: "text", Text: PersistedBlock(path, int64(len(text)), previewOf(text), "Saved because "+why+".")})
		if r.Data == nil {
			r.Data = map[string]any{}
		}
		r.Data["persistedOutputPath"] = path
		r.Data["persistedOutputSize"] = len(text)
	} else if text != "" {
		blocks = append(blocks, Block{Type: "text", Text: text})
	}
	if images > 0 {
		blocks = append(blocks, Block{Type: "text", Text: fmt.Sprintf("[%d image(s) left out: %s; read them in a request of their own]", images, why)})
	}
	r.Content = blocks
	for k, v := range r.Data {
		if str, ok := v.(string); ok && len(str) > PreviewChars {
			r.Data[k] = ""
		}
	}
}
