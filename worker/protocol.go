package worker

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// The wire protocol between the daemon (Client) and the worker (Main), on one stream socket
// (a socketpair end that the worker gets as fd 3). Both directions carry frames:
//
//	u32 length of the rest | u64 request id | u32 header length | header JSON | payload bytes
//
// all integers big-endian. A request's header is a Request, a response's a Response; the
// payload carries file contents raw (no base64), so a 4 KB Read costs two small frames.
// Requests are multiplexed: the worker answers each in its own goroutine, in any order, and
// the client matches answers to callers by id. Id 0 is never used.

// MaxFrameBytes bounds one frame, so a corrupt length cannot make either side allocate
// unboundedly. Writes and edits larger than this are refused before they are sent.
const MaxFrameBytes = 256 << 20

// Ops of Request.Op.
const (
	OpRead     = "read"
	OpWrite    = "write"
	OpEdit     = "edit"
	OpGlob     = "glob"
	OpGrep     = "grep"
	OpResolve  = "resolve"
	OpReadFile = "readfile"
	OpMarkdown = "markdown" // the payload is HTML; the answer's payload is its Markdown
	OpCancel   = "cancel"
)

// Request is a request header. Exactly one of the argument fields matches Op.
type Request struct {
	Op       string     `json:"op"`
	Read     *ReadArgs  `json:"read,omitempty"`
	Write    *WriteArgs `json:"write,omitempty"`
	Edit     *EditArgs  `json:"edit,omitempty"`
	Glob     *GlobArgs  `json:"glob,omitempty"`
	Grep     *GrepArgs  `json:"grep,omitempty"`
	Path     string     `json:"path,omitempty"`      // resolve, readfile
	MaxBytes int64      `json:"max_bytes,omitempty"` // readfile
	CancelID uint64     `json:"cancel_id,omitempty"` // cancel: the request to stop
	Domain   string     `json:"domain,omitempty"`    // markdown: scheme://host of the page
	// Fallback (resolve) also looks for a Unicode or spacing variant of a missing name, as
	// Read does: the policy then decides on the variant that Read will open.
	Fallback bool `json:"fallback,omitempty"`
}

// Response is a response header. Err is set on failure; otherwise the field of the op.
type Response struct {
	Err      *WireError     `json:"err,omitempty"`
	Read     *ReadReply     `json:"read,omitempty"`
	Write    *WriteReply    `json:"write,omitempty"`
	Glob     *GlobReply     `json:"glob,omitempty"`
	Grep     *GrepReply     `json:"grep,omitempty"`
	Resolve  *Resolved      `json:"resolve,omitempty"`
	FileInfo *FileInfo      `json:"file,omitempty"` // readfile
	Markdown *MarkdownReply `json:"markdown,omitempty"`
}

// WireError is an error crossing the socket: a telemetry-safe code and the agent-facing message.
type WireError struct {
	Code errcode.Code `json:"code"`
	Msg  string       `json:"msg"`
}

func (e *WireError) err() error { return errcode.Msg(e.Code, e.Msg) }

func wireError(err error) *WireError {
	return &WireError{Code: errcode.Of(err), Msg: err.Error()}
}

// FileInfo is what the daemon needs to know about a file for read-state bookkeeping.
type FileInfo struct {
	Path      string `json:"path"` // the path actually used (after Unicode fallback)
	Size      int64  `json:"size"`
	MTimeNano int64  `json:"mtime_ns"`
	Mode      uint32 `json:"mode"`
	UID       uint32 `json:"uid"`              // the file's owner
	SHA256    string `json:"sha256,omitempty"` // of the whole file; empty when too large to hash
	Truncated bool   `json:"truncated,omitempty"`
}

// Expect is what the session last read of a file; writes and edits refuse a file that no
// longer matches it.
type Expect struct {
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MTimeNano int64  `json:"mtime_ns"`
}

// Read kinds.
const (
	KindText  = "text"  // cat -n lines
	KindImage = "image" // base64 of the bytes, media type sniffed: the user's worker encodes, not the shared daemon
	KindBytes = "bytes" // raw bytes (notebooks)
	KindPDF   = "pdf"   // text per page via pdftotext
)

// ReadArgs asks for part of a file.
type ReadArgs struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Offset is the first line, 1-based (text); Limit the number of lines.
	Offset int `json:"offset,omitempty"`
	Limit  int `json:"limit,omitempty"`
	// MaxLineChars cuts longer lines with a marker.
	MaxLineChars int `json:"max_line_chars,omitempty"`
	// MaxOutputBytes caps the payload; a text selection past it is cut at a line boundary.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
	// MaxFileBytes refuses image, bytes and pdf files larger than this.
	MaxFileBytes int64 `json:"max_file_bytes,omitempty"`
	// HashLimit: files up to this size are hashed whole for the read state.
	HashLimit int64 `json:"hash_limit,omitempty"`
	// FirstPage, LastPage select PDF pages (1-based, inclusive); 0 = all.
	FirstPage int `json:"first_page,omitempty"`
	LastPage  int `json:"last_page,omitempty"`
	// Decided is what a resolve of Path (with Fallback) found and the policy decided on: the
	// worker opens exactly that file, or refuses. Without it Path itself is opened, never a
	// variant of its name.
	Decided *Resolved `json:"decided,omitempty"`
	// Deny are absolute gitignore-style patterns (as permission.MatchPath takes them) of paths
	// the session may not read: the near names a missing file's error suggests leave them out.
	Deny []string `json:"deny,omitempty"`
}

// ReadReply describes the payload of a read.
type ReadReply struct {
	FileInfo
	MediaType  string `json:"media_type,omitempty"` // image
	TotalLines int    `json:"total_lines"`          // text: lines in the file (when scanned to the end)
	StartLine  int    `json:"start_line"`           // text
	Lines      int    `json:"lines"`                // text: lines in the payload
	MoreLines  bool   `json:"more_lines,omitempty"` // text: the file goes on past the payload
	CutByBytes bool   `json:"cut_by_bytes,omitempty"`
	LongLines  int    `json:"long_lines,omitempty"` // text: lines cut at MaxLineChars
	Pages      int    `json:"pages,omitempty"`      // pdf: pages in the document
}

// WriteArgs replaces a file with the payload.
type WriteArgs struct {
	Path string `json:"path"`
	// Expect is required when the file exists; nil means "must not exist yet".
	Expect *Expect `json:"expect,omitempty"`
	// Decided is where the policy decided Path leads (Resolved.Resolved): the write goes there
	// or nowhere. Empty: wherever Path leads when the write starts.
	Decided string `json:"decided,omitempty"`
}

// WriteReply is the new state of a written or edited file.
type WriteReply struct {
	FileInfo
	Created bool `json:"created,omitempty"`
	// Snippet is the edited region, cat -n style (edit only).
	Snippet string `json:"snippet,omitempty"`
	// Replacements is how many occurrences were replaced (edit only).
	Replacements int `json:"replacements,omitempty"`
	// Fuzzy is set when an old_string matched only after quote/whitespace normalization.
	Fuzzy bool `json:"fuzzy,omitempty"`
	// Lines is the line count of the new content.
	Lines int `json:"lines"`
}

// Edit is one replacement.
type Edit struct {
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all,omitempty"`
}

// EditArgs applies edits in order, all or nothing.
type EditArgs struct {
	Path   string  `json:"path"`
	Edits  []Edit  `json:"edits"`
	Expect *Expect `json:"expect,omitempty"`
	// Decided is as in WriteArgs.
	Decided string `json:"decided,omitempty"`
}

// GlobArgs lists files matching Pattern under Root.
type GlobArgs struct {
	Pattern string `json:"pattern"`
	Root    string `json:"root"`
	Limit   int    `json:"limit"`
	// Deny are absolute gitignore-style patterns (as permission.MatchPath takes them) of paths
	// the session may not read: they are neither listed nor walked into.
	Deny []string `json:"deny,omitempty"`
}

// GlobReply lists matches, newest first.
type GlobReply struct {
	Paths     []string `json:"paths"`
	Truncated bool     `json:"truncated,omitempty"`
	Total     int      `json:"total"`
}

// GrepArgs runs rg with Args in Dir and pages its output lines.
type GrepArgs struct {
	Args   []string `json:"args"`
	Dir    string   `json:"dir"`
	Offset int      `json:"offset,omitempty"`
	Limit  int      `json:"limit,omitempty"` // 0 = all
	// SortByMTime sorts output lines (file paths) newest first, as Claude Code's
	// files_with_matches does; it needs the whole output before paging.
	SortByMTime bool `json:"sort_by_mtime,omitempty"`
	// MaxBytes bounds what is read of rg's output.
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Deny are absolute gitignore-style patterns (as permission.MatchPath takes them) of paths
	// the session may not read: rg is told to exclude them, and an output line of a file
	// matching one is dropped all the same. With Deny, Args must end with "--", Path.
	Deny []string `json:"deny,omitempty"`
	// Path is the searched path, the last of Args (needed with Deny and Decided).
	Path string `json:"path,omitempty"`
	// Decided is what a resolve of Path found and the policy decided on: rg searches exactly
	// that file or directory, opened without following any symlink and checked by device and
	// inode, or nothing. A name swapped since the decision (a symlink repointed, a file
	// renamed over it) is refused, never followed. Without it Path is searched by name.
	Decided *Resolved `json:"decided,omitempty"`
}

// GrepReply is one page of output lines (payload, newline-separated).
type GrepReply struct {
	Lines int `json:"lines"`
	// Total is the number of lines rg printed, when it ran to the end (Complete).
	Total    int  `json:"total"`
	Complete bool `json:"complete"`
	More     bool `json:"more,omitempty"` // lines exist past this page
	// ExitCode is rg's exit status, or -1 when it did not exit (Signal says why).
	ExitCode int    `json:"exit_code"`
	Stderr   string `json:"stderr,omitempty"`
	// Signal names the signal that ended rg ("SIGKILL") when it was not the worker's own
	// stop; OOMKilled is set when that was the kernel's out-of-memory killer.
	Signal    string `json:"signal,omitempty"`
	OOMKilled bool   `json:"oom_killed,omitempty"`
	// CutByBytes is set when MaxBytes stopped the read.
	CutByBytes bool `json:"cut_by_bytes,omitempty"`
}

// Resolved is a path resolved as the owner.
type Resolved struct {
	Resolved string `json:"resolved"`
	// Special is "device", "fifo", "socket" or "proc" for paths never to be read.
	Special string `json:"special,omitempty"`
	Exists  bool   `json:"exists"`
	IsDir   bool   `json:"is_dir,omitempty"`
	// Variant is set when the path asked for did not exist and a resolve with Fallback found
	// a name differing only in Unicode form or spacing: the path that will be opened instead.
	// Resolved is then that variant's resolution.
	Variant string `json:"variant,omitempty"`
	// Dev and Ino identify the file Resolved names, when it exists: a later open of the
	// decided path checks it still finds this file.
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

const frameHead = 4 + 8 + 4

// writeFrame writes one frame; the caller serializes writers and flushes.
func writeFrame(w *bufio.Writer, id uint64, header any, payload []byte) error {
	h, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("encode frame header: %w", err)
	}
	n := 8 + 4 + len(h) + len(payload)
	if n+4 > MaxFrameBytes {
		return ErrFrameTooLarge
	}
	var head [frameHead]byte
	binary.BigEndian.PutUint32(head[0:], uint32(n))
	binary.BigEndian.PutUint64(head[4:], id)
	binary.BigEndian.PutUint32(head[12:], uint32(len(h)))
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	_, err = w.Write(payload)
	return err
}

// readFrame reads one frame and returns its id, raw header and payload.
func readFrame(r *bufio.Reader) (id uint64, header, payload []byte, err error) {
	var head [frameHead]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, nil, err
	}
	n := binary.BigEndian.Uint32(head[0:])
	id = binary.BigEndian.Uint64(head[4:])
	hl := binary.BigEndian.Uint32(head[12:])
	// In 64 bits: a length near 2³² wraps n+4 past the bound in 32, and a broken worker
	// would have the daemon allocate 4 GiB for it.
	if uint64(n)+4 > MaxFrameBytes || n < 12 || hl > n-12 {
		return 0, nil, nil, ErrFrameTooLarge
	}
	buf := make([]byte, n-12)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, nil, err
	}
	return id, buf[:hl], buf[hl:], nil
}
