package audit

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// truncatedInput is what a record keeps of an input larger than Config.MaxInputBytes:
//
//	{"truncated":true,"bytes":N,"file_path":"<whole>","preview":"<the redacted canonical input, cut>"}
//
// N is the size of the redacted canonical input; the record's input_digest stays the digest
// of the whole (RFC 8785 form), so the input can still be matched against a copy. The input's
// path fields (pathKeys) come first and whole (up to half of max each), whatever the preview
// keeps: a MultiEdit's edits sort before its file_path, and a preview cut by bytes lost which
// file was edited, to sbctl audit query --grep and to the OCSF file.path alike. The preview is
// the input with its longest strings cut (shortened) when that fits, else its first bytes, cut
// on a UTF-8 boundary. The whole object fits in max bytes. One user's large inputs then cannot
// fill the volume and push out others' history (issue 17).
func truncatedInput(red json.RawMessage, max int) json.RawMessage {
	type trunc struct {
		Truncated    bool   `json:"truncated"`
		Bytes        int    `json:"bytes"`
		FilePath     string `json:"file_path,omitempty"`
		NotebookPath string `json:"notebook_path,omitempty"`
		Path         string `json:"path,omitempty"`
		Preview      string `json:"preview"`
	}
	t := trunc{Truncated: true, Bytes: len(red)}
	paths := pathFields(red, max/2)
	t.FilePath, t.NotebookPath, t.Path = paths["file_path"], paths["notebook_path"], paths["path"]
	fits := func(preview string) (json.RawMessage, bool) {
		t.Preview = preview
		b, err := json.Marshal(t)
		return b, err == nil && len(b) <= max
	}
	if short, ok := shortened(red, max/4); ok {
		if b, ok := fits(string(short)); ok {
			return b
		}
	}
	n := max / 2 // escaping may grow the preview: start at half and shrink until it fits
	for ; n > 0; n /= 2 {
		cut := red[:min(n, len(red))]
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
		if b, ok := fits(string(cut)); ok {
			return b
		}
	}
	if b, ok := fits(""); ok {
		return b
	}
	b, _ := json.Marshal(trunc{Truncated: true, Bytes: len(red)})
	return b
}

// pathKeys are the input fields that name what a call acted on (Read, Write, Edit, MultiEdit:
// file_path; NotebookEdit: notebook_path; Glob, Grep: path). A Bash command is never cut: one
// the log would cut is refused.
var pathKeys = []string{"file_path", "notebook_path", "path"}

// pathFields are red's top-level pathKeys that are strings, each cut to most bytes (a path
// that long names no file a call could open; the bound keeps the record within max).
func pathFields(red json.RawMessage, most int) map[string]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(red, &m) != nil {
		return nil
	}
	out := map[string]string{}
	for _, k := range pathKeys {
		var s string
		if json.Unmarshal(m[k], &s) == nil && s != "" {
			out[k] = TruncateDetail(s, most)
		}
	}
	return out
}

// shortened is red, a JSON value, with its longest strings cut to fit in budget bytes (each
// keeps its head and says how much went), or false when cutting strings cannot get it there.
func shortened(red json.RawMessage, budget int) ([]byte, bool) {
	v, err := decodeNumbers(red)
	if err != nil {
		return nil, false
	}
	for range 64 {
		b, err := canonicalJSON(v)
		if err != nil {
			return nil, false
		}
		if len(b) <= budget {
			return b, true
		}
		set, n := longestString(v)
		if set == nil || n <= 64 {
			return nil, false
		}
		set(n / 2)
	}
	return nil, false
}

// longestString finds the longest string in v (objects and arrays walked) and returns a
// function that cuts it to about keep bytes, with its length.
func longestString(v any) (func(keep int), int) {
	var best func(keep int)
	bestLen := 0
	var walk func(v any, set func(string))
	walk = func(v any, set func(string)) {
		switch t := v.(type) {
		case string:
			if set != nil && len(t) > bestLen {
				bestLen = len(t)
				best = func(keep int) {
					cut := []byte(t[:keep])
					for len(cut) > 0 && !utf8.Valid(cut) {
						cut = cut[:len(cut)-1]
					}
					set(fmt.Sprintf("%s…[%d bytes cut]", cut, len(t)-len(cut)))
				}
			}
		case []any:
			for i := range t {
				walk(t[i], func(s string) { t[i] = s })
			}
		case map[string]any:
			for k := range t {
				walk(t[k], func(s string) { t[k] = s })
			}
		}
	}
	walk(v, nil)
	return best, bestLen
}

// TruncateInput is truncatedInput for other logs of inputs (the policy's decision logs):
// red, already redacted, is kept whole up to max bytes, else replaced by the truncated form.
func TruncateInput(red json.RawMessage, max int) json.RawMessage {
	if len(red) <= max {
		return red
	}
	return truncatedInput(red, max)
}

// TruncateDetail cuts a detail value longer than max, saying how long it was.
func TruncateDetail(v string, max int) string {
	if len(v) <= max {
		return v
	}
	cut := v[:max]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return fmt.Sprintf("%s…[truncated: %d bytes]", cut, len(v))
}

// spaceKinds are refused while the audit volume is short of space: the records of new work,
// and every record a user can add at will (an agent's reports, a proxied program's
// connections, which are refused with it). Ending work (session.delete, approval.resolve),
// the daemon's own and the policy's records still go through, so the daemon can stop and
// sessions can be ended to free space: the margin min_free_bytes keeps is theirs, and one
// user's records must not spend it down to a full volume, which stops the log for everyone.
var spaceKinds = map[Kind]bool{
	KindCallDecide: true, KindCallStart: true, KindCallEnd: true,
	KindSessionCreate: true, KindSessionUpdate: true, KindApprovalRequest: true,
	KindCallReport: true, KindNetConnect: true,
}

// debtKinds are the records of ending work a user's earlier records began: never refused, as
// the daemon must be able to end work, but their bytes are spent all the same, in debt if need
// be, so that creating and ending sessions (whose end record holds their whole state) in a
// loop cannot add twice the budget.
var debtKinds = map[Kind]bool{KindSessionDelete: true, KindApprovalResolve: true, KindTaskEnd: true,
	KindSessionSuspend: true, KindSessionResume: true}

// ownerBudgets holds a byte budget per uid, refilled at Config.MaxBytesPerUserHour an hour.
type ownerBudgets struct {
	mu sync.Mutex
	m  map[uint32]*rate.Limiter
}

// chargeOwner spends n bytes of r's caller's budget, or refuses r: one user's records of new
// work (the spaceKinds, which a user adds at will) may not add more than
// Config.MaxBytesPerUserHour to the log in an hour. Without it one user's flood fills the
// volume to min_free_bytes, and then every user's calls are refused; with it that user's own
// are, and the others go on. Root's records and the daemon's own are not counted.
func (l *Log) chargeOwner(r *Record, n int) error {
	max := l.cfg.MaxBytesPerUserHour
	who := r.Caller
	if who == nil {
		who = r.Owner
	}
	if max <= 0 || !spaceKinds[r.Kind] && !debtKinds[r.Kind] || who == nil || who.UID == 0 {
		return nil
	}
	b := &l.owners
	b.mu.Lock()
	tenant := who.tenant()
	lim := b.m[tenant]
	if lim == nil {
		if b.m == nil {
			b.m = map[uint32]*rate.Limiter{}
		}
		lim = rate.NewLimiter(rate.Limit(float64(max)/3600), int(max))
		b.m[tenant] = lim
	}
	b.mu.Unlock()
	if r.Kind == KindCallEnd && !r.NotRun || debtKinds[r.Kind] {
		// What ran is always recorded: its bytes are spent, in debt if need be, never refused.
		// The end of a call that did not run is not exempt: a caller past the budget could
		// otherwise add one record per refused call, without end.
		lim.ReserveN(time.Now(), min(n, int(max)))
		return nil
	}
	if !lim.AllowN(time.Now(), n) {
		return errcode.New(errcode.RateLimited, fmt.Errorf("%w: uid %d's records took their %d bytes for the hour (audit.max_bytes_per_user_hour); try again later", ErrOwnerBudget, tenant, max))
	}
	return nil
}

// spaceCheckEvery is how often the free space is looked up (a statfs) under load.
const spaceCheckEvery = 250 * time.Millisecond

// checkSpace refuses a record of new work while the audit volume has less than
// Config.MinFreeBytes free: auditd's disk_full_action=suspend. Deleting history to make room
// would let one user's flood erase another's records; refusing new calls does not.
func (l *Log) checkSpace(k Kind) error {
	if l.cfg.MinFreeBytes <= 0 || !spaceKinds[k] {
		return nil
	}
	now := time.Now().UnixNano()
	if last := l.spaceChecked.Load(); now-last >= int64(spaceCheckEvery) && l.spaceChecked.CompareAndSwap(last, now) {
		l.refreshSpace()
	}
	if l.spaceLow.Load() {
		return errcode.New(errcode.AuditUnavailable, fmt.Errorf("%w: less than %d bytes free on the audit volume (audit.min_free_bytes); calls are refused until an administrator frees space", ErrLowSpace, l.cfg.MinFreeBytes))
	}
	return nil
}

// refreshSpace looks up the audit volume's free space now and says when it crosses
// Config.MinFreeBytes.
func (l *Log) refreshSpace() {
	if l.cfg.MinFreeBytes <= 0 {
		return
	}
	// A volume whose free space cannot be read is taken as short of it: the floor exists so
	// that calls stop before the log cannot be written, and an unknown is not a yes.
	free, _, err := volumeFree(l.cfg.Dir)
	if err != nil {
		l.log.Error("audit volume's free space unknown", zap.String("dir", l.cfg.Dir), zap.Error(err))
	}
	low := err != nil || free < l.cfg.MinFreeBytes
	if was := l.spaceLow.Swap(low); was != low {
		if low {
			l.log.Error("ALERT: audit volume short of space; new calls are refused until space is freed (audit.min_free_bytes)",
				zap.Int64("free_bytes", free), zap.Int64("min_free_bytes", l.cfg.MinFreeBytes), zap.String("dir", l.cfg.Dir))
		} else {
			l.log.Warn("audit volume has space again; calls are accepted", zap.Int64("free_bytes", free))
		}
	}
}

// volumeFree returns the free bytes on dir's volume that root may write (the daemon writes
// the log as root) and, of them, what any other user may: a file system such as ext4 keeps a
// reserve only root can fill, so users' own files, however many, cannot stop the log there.
func volumeFree(dir string) (root, users int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return int64(st.Bfree) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}

// warnSharedVolume says at start when the audit volume keeps less than Config.MinFreeBytes
// for root alone (XFS and btrfs keep none; ext4 does unless tuned to 0): users' files there,
// a call's output in a home on the same volume, can then bring it under the floor, and every
// user's calls are refused until space is freed.
//
// No file system keeps inodes for root alone: where users may write the audit volume (it
// holds /home, /tmp or /var/tmp), their files can take every inode, and the daemon can then
// make no new session's results dir nor rotate the log. That is said at start too.
func (l *Log) warnSharedVolume() {
	root, users, err := volumeFree(l.cfg.Dir)
	if err == nil && l.cfg.MinFreeBytes > 0 && root-users < l.cfg.MinFreeBytes {
		l.log.Warn("the audit volume keeps less than audit.min_free_bytes that only root may write: if users' files share it, one user can fill it and stop every user's calls; give the audit log a volume of its own",
			zap.String("dir", l.cfg.Dir), zap.Int64("root_only_bytes", root-users), zap.Int64("min_free_bytes", l.cfg.MinFreeBytes))
	}
	if shared := usersWritableOn(l.cfg.Dir); shared != "" {
		l.log.Warn("the audit volume is one users write to: their files can use up its inodes, which no file system keeps for root, and new sessions and log rotation then fail; give the state directory a volume of its own",
			zap.String("dir", l.cfg.Dir), zap.String("shared_with", shared))
	}
}

// usersWritableOn returns a directory users may write to (/home, /tmp, /var/tmp) that is on
// dir's file system, or "".
func usersWritableOn(dir string) string {
	var st unix.Stat_t
	if unix.Stat(dir, &st) != nil {
		return ""
	}
	for _, d := range []string{"/home", "/tmp", "/var/tmp"} {
		var o unix.Stat_t
		if unix.Stat(d, &o) == nil && o.Dev == st.Dev {
			return d
		}
	}
	return ""
}

// youngerThanRetention reports whether a rotated file's newest record (its mtime) is
// younger than Config.MinRetainAge, which no retention setting may delete.
func (l *Log) youngerThanRetention(mtime time.Time) bool {
	return l.cfg.MinRetainAge > 0 && time.Since(mtime) < l.cfg.MinRetainAge
}
