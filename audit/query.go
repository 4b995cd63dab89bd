package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Filter selects records; zero fields match everything. The daemon enforces "callers see only
// their own records" by setting UID to the peer's uid for non-admins.
type Filter struct {
	Session  string
	User     string
	UID      *uint32 // pointer because uid 0 is a real filter
	Tool     string
	Behavior string // decision behavior: allow, deny, ask
	Kinds    []Kind
	Since    time.Time // inclusive
	Until    time.Time // exclusive
}

// OwnUID returns a filter for uid's own records.
func OwnUID(uid uint32) Filter { return Filter{UID: &uid} }

// Match reports whether r passes f. A uid or user filter never matches records without a
// caller (daemon and audit.* records), so a caller cannot see other sessions' system context.
func (f Filter) Match(r *Record) bool {
	if f.UID != nil && (r.Caller == nil || r.Caller.UID != *f.UID) {
		return false
	}
	if f.User != "" && (r.Caller == nil || r.Caller.User != f.User) {
		return false
	}
	if f.Session != "" && r.Session != f.Session {
		return false
	}
	if f.Tool != "" && r.Tool != f.Tool {
		return false
	}
	if f.Behavior != "" && (r.Decision == nil || r.Decision.Behavior != f.Behavior) {
		return false
	}
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, r.Kind) {
		return false
	}
	if !f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !r.Time.Before(f.Until) {
		return false
	}
	return true
}

// scanFile calls fn for each complete record line of path from byte offset off (the line
// without newline). An incomplete last line is not a record yet (being written, or a torn tail
// Open will move aside) and is skipped. It returns the offset after the last complete line.
func scanFile(path string, off int64, fn func(r *Record, line []byte) error) (int64, error) {
	f, err := openRead(path)
	if err != nil {
		return off, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off, fmt.Errorf("seek audit file: %w", err)
	}
	good, _, err := scanLines(f, func(line []byte, at int64) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s at byte %d: decode record: %w", path, off+at, err)
		}
		return fn(&r, line)
	})
	return off + good, err
}

var errStop = errors.New("stop")

// Query yields the records of dir that match f, oldest first. It reads the files as they are
// and does not verify hashes (Verify does).
func Query(dir string, f Filter) iter.Seq2[*Record, error] {
	return QueryFrom(dir, "", f)
}

// QueryFrom is Query from the log file named first (a base name, as ListFiles and
// CurrentFile give) onward: the older files are not read. An empty first reads them all.
func QueryFrom(dir, first string, f Filter) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		files, err := ListFiles(dir)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, path := range files {
			if first != "" && filepath.Base(path) < first {
				continue
			}
			_, err := scanFile(path, 0, func(r *Record, _ []byte) error {
				if f.Match(r) && !yield(r, nil) {
					return errStop
				}
				return nil
			})
			if errors.Is(err, errStop) {
				return
			}
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed by retention while we listed
			}
			if err != nil {
				yield(nil, err)
				return
			}
		}
	}
}

// Export writes the matching records to w as JSON lines, byte for byte as stored, so each
// exported line's hash still checks. It returns the number of records written.
func Export(w io.Writer, dir string, f Filter) (int, error) {
	files, err := ListFiles(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, path := range files {
		_, err := scanFile(path, 0, func(r *Record, line []byte) error {
			if !f.Match(r) {
				return nil
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			n++
			return nil
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
	}
	return n, nil
}

// tailPoll is how often Tail looks for new records; the log has no notification channel for
// readers in other processes, and a quarter second is prompt enough for a human.
const tailPoll = 250 * time.Millisecond

// Tail calls fn for the matching records of the newest file and, with follow, for every record
// appended afterwards (across rotations) until ctx is done or fn returns an error. It returns
// nil when ctx ends a follow. caughtUp, when not nil, is called once the newest file has been
// read to its end the first time: what follows is only what is appended.
func Tail(ctx context.Context, dir string, f Filter, follow bool, caughtUp func(), fn func(*Record) error) error {
	files, err := ListFiles(dir)
	if err != nil {
		return err
	}
	if len(files) == 0 && !follow {
		return nil
	}
	var cur string
	var off int64
	if len(files) > 0 {
		cur = files[len(files)-1]
	}
	emit := func(r *Record, _ []byte) error {
		if f.Match(r) {
			return fn(r)
		}
		return nil
	}
	for {
		if cur != "" {
			if off, err = scanFile(cur, off, emit); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		if caughtUp != nil {
			caughtUp()
			caughtUp = nil
		}
		if !follow {
			return nil
		}
		files, err := ListFiles(dir)
		if err != nil {
			return err
		}
		if i := slices.Index(files, cur); i+1 < len(files) {
			// The writer finishes a file before it creates the next, so one more read of cur
			// gets its last records before moving on.
			if cur != "" {
				if _, err := scanFile(cur, off, emit); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
			cur, off = files[i+1], 0
			continue
		}
		t := time.NewTimer(tailPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Ref is where one record is stored: its file and the byte range of its line.
type Ref struct {
	Path string
	Off  int64
	Len  int
	Seq  uint64
}

// TailRefs returns where the last n records of dir that match f are, oldest first. A tail
// holds their places, not the records: 10 000 records of up to the inputs' 64 KiB each held
// until the scan ended took 650 MB of the daemon for one query. ReadRefs reads them.
func TailRefs(dir string, f Filter, n int) ([]Ref, error) {
	if n <= 0 {
		return nil, nil
	}
	files, err := ListFiles(dir)
	if err != nil {
		return nil, err
	}
	ring := make([]Ref, 0, min(n, 1024))
	next := 0 // where the next ref goes once ring is full
	for _, path := range files {
		_, err := scanFileAt(path, func(r *Record, off int64, line []byte) error {
			if !f.Match(r) {
				return nil
			}
			ref := Ref{Path: path, Off: off, Len: len(line), Seq: r.Seq}
			if len(ring) < n {
				ring = append(ring, ref)
				return nil
			}
			ring[next] = ref
			next = (next + 1) % n
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by retention while we listed
		}
		if err != nil {
			return nil, err
		}
	}
	return append(ring[next:], ring[:next]...), nil
}

// ReadRefs yields the records at refs, in order. One whose file retention removed since is
// skipped. Each record read must still be the one TailRefs found there (its sequence number)
// and match filter: bytes that changed meanwhile are an error, never another caller's record.
func ReadRefs(refs []Ref, filter Filter) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		var f *os.File
		var open string
		defer func() {
			if f != nil {
				f.Close()
			}
		}()
		var buf []byte
		for _, ref := range refs {
			if ref.Path != open {
				if f != nil {
					f.Close()
					f = nil
				}
				open = ref.Path
				var err error
				if f, err = openRead(ref.Path); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						continue
					}
					yield(nil, err)
					return
				}
			}
			if f == nil {
				continue
			}
			if cap(buf) < ref.Len {
				buf = make([]byte, ref.Len)
			}
			buf = buf[:ref.Len]
			if _, err := f.ReadAt(buf, ref.Off); err != nil {
				yield(nil, fmt.Errorf("%s at byte %d: read record: %w", ref.Path, ref.Off, err))
				return
			}
			var r Record
			if err := json.Unmarshal(buf, &r); err != nil {
				yield(nil, fmt.Errorf("%s at byte %d: decode record: %w", ref.Path, ref.Off, err))
				return
			}
			if r.Seq != ref.Seq || !filter.Match(&r) {
				yield(nil, fmt.Errorf("%s at byte %d: the log changed while it was read; query again", ref.Path, ref.Off))
				return
			}
			if !yield(&r, nil) {
				return
			}
		}
	}
}

// scanFileAt is scanFile from the start of path, also telling each line's offset.
func scanFileAt(path string, fn func(r *Record, off int64, line []byte) error) (int64, error) {
	f, err := openRead(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	good, _, err := scanLines(f, func(line []byte, at int64) error {
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("%s at byte %d: decode record: %w", path, at, err)
		}
		return fn(&r, at, line)
	})
	return good, err
}
