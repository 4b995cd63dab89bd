package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

// Read limits. Read is Unbounded for the result budget because it caps itself here.
const (
	readMaxOutputBytes   = 256 << 10 // one Read's text
	readMaxNotebookBytes = 10 << 20
	// readMaxPDFBytes bounds a PDF the worker opens (its text is bounded by readMaxOutputBytes
	// and its metadata by the worker).
	readMaxPDFBytes  = 32 << 20
	readMaxPDFPages  = 20 // per call
	readPDFPagesFree = 10 // a longer PDF needs `pages`
)

const readSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["file_path"],
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to read"},
    "offset": {"type": "integer", "minimum": 0, "description": "The line number to start reading from. Only provide if the file is too large to read at once"},
    "limit": {"type": "integer", "minimum": 1, "description": "The number of lines to read. Only provide if the file is too large to read at once."},
    "pages": {"type": "string", "description": "Page range for PDF files (e.g., \"1-5\", \"3\", \"10-20\"). Only applicable to PDF files. Maximum 20 pages per request."}
  }
}`

var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true, ".gif": true, ".webp": true}

func readDef(h *Host) Def {
	return Def{
		Name: "Read",
		Description: "Reads a file from the local filesystem. file_path must be absolute. By default it reads up to 2000 lines from the start; " +
			"offset and limit select lines. Lines are numbered cat -n style and lines longer than 2000 characters are cut. " +
			"Reads images (PNG, JPEG, GIF, WebP) as images, PDFs as text per page (pages: \"1-5\", at most 20; required over 10 pages), " +
			"and Jupyter notebooks (.ipynb) as cells with their outputs. It cannot read directories: use Glob or Bash ls.",
		Schema:             readSchema,
		ReadOnly:           always,
		ConcurrencySafe:    always,
		Validate:           requireAbs("file_path"),
		Backfill:           backfillPath("file_path", false),
		CheckPermissions:   h.readFacts,
		MaxResultSizeChars: Unbounded,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			return h.runRead(ctx, c)
		},
	}
}

// readDecision is what Read's CheckPermissions resolved as the owner, which the policy then
// decided on: Run opens that file and no other.
type readDecision struct {
	requested string
	resolved  worker.Resolved
}

// WARNING: the policy decides on these facts and Read opens only what they name (issue 16,
// item 7); rerun TestReadDecidesOnWhatItOpens as root after changing.
//
// readFacts resolves file_path as the owner the way the read will: `~` and `..` (expandPath),
// the Unicode and spacing fallback for a missing name, and symlinks. The facts name the path
// asked for and, when the name fell back, the variant, each with the symlink target that will
// be opened; Run later hands the worker this resolution, and the worker refuses a file that
// is no longer it.
func (h *Host) readFacts(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	p := c.Input.String("file_path")
	if p == "" {
		return permission.ToolFacts{}, nil
	}
	p = expandPath(c, p)
	r, err := h.resolveAsOwner(ctx, c, p, func(w *worker.Client) (*worker.Resolved, error) { return w.ResolveRead(ctx, p) })
	if err != nil {
		return permission.ToolFacts{}, err
	}
	facts := []permission.PathFact{{Requested: p, Resolved: r.Resolved, Access: permission.Read, Special: r.Special}}
	if r.Variant != "" {
		facts = append(facts, permission.PathFact{Requested: r.Variant, Resolved: r.Resolved, Access: permission.Read, Special: r.Special})
	}
	raw, err := h.rawFact(c, "file_path", permission.Read)
	if err != nil {
		return permission.ToolFacts{}, err
	}
	if raw != nil {
		facts = append(facts, *raw)
	}
	c.read = &readDecision{requested: p, resolved: *r}
	return permission.ToolFacts{Paths: facts}, nil
}

func (h *Host) runRead(ctx context.Context, c *Call) (*Result, error) {
	path := expandPath(c, c.Input.String("file_path"))
	ext := strings.ToLower(filepath.Ext(path))
	args := worker.ReadArgs{Path: path, Kind: worker.KindText, MaxOutputBytes: readMaxOutputBytes}
	// A missing file's "did you mean" names only what a Read may see.
	deny, err := readDenyPatterns(c, "Read")
	if err != nil {
		return nil, err
	}
	args.Deny = deny
	// Outside the pipeline (no decision) the worker opens path itself and never a variant.
	if d := c.read; d != nil {
		if d.requested != path {
			return nil, errcode.Msg(errcode.Internal, fmt.Sprintf("refused to read %s: the permission decision was made on %s", path, d.requested))
		}
		args.Decided = &d.resolved
	}
	explicit := c.Input.Has("offset") || c.Input.Has("limit")
	switch {
	case imageExts[ext]:
		args.Kind, args.MaxFileBytes = worker.KindImage, MaxImageBytes
	case ext == ".pdf":
		args.Kind, args.MaxFileBytes = worker.KindPDF, readMaxPDFBytes
		first, last, err := parsePages(c.Input.String("pages"))
		if err != nil {
			return nil, err
		}
		if first == 0 {
			first, last = 1, readPDFPagesFree
		}
		args.FirstPage, args.LastPage = first, last
	case ext == ".ipynb":
		args.Kind, args.MaxFileBytes = worker.KindBytes, readMaxNotebookBytes
	default:
		args.Offset = int(c.Input.Int("offset", 1))
		args.Limit = int(c.Input.Int("limit", worker.DefaultLimit))
	}
	// An image the response has no room for is left out before the worker reads and sends
	// it: a batch of big images would otherwise make the daemon read and encode every one
	// and then drop most (the result fitter's shrink), the work one user's batches make
	// everyone else wait behind.
	room := int64(-1)
	if args.Kind == worker.KindImage && c.room != nil {
		room = max(0, (c.room()-imageResultBytes)/4*3) // base64: 4 bytes for 3
		if room == 0 {
			return imageLeftOut(path, room), nil
		}
		args.MaxFileBytes = min(args.MaxFileBytes, room)
	}
	var reply *worker.ReadReply
	var payload []byte
	err = h.withWorker(ctx, c.Session, func(w *worker.Client) error {
		var err error
		reply, payload, err = w.Read(ctx, args)
		return err
	})
	if err != nil && args.Kind == worker.KindImage && errcode.Of(err) == errcode.TooLarge && room >= 0 && room < MaxImageBytes {
		return imageLeftOut(path, room), nil
	}
	if err != nil && args.Kind == worker.KindImage && errcode.Of(err) == errcode.TooLarge {
		return nil, errcode.New(errcode.TooLarge, fmt.Errorf("%s is larger than an image result may be (%s; its base64 is the 5 MB the model's API takes per image); make a smaller copy first, e.g. Bash `convert %s -resize 50%% /tmp/smaller.png`, and Read that", path, humanBytes(MaxImageBytes), path))
	}
	if err != nil {
		return nil, err
	}
	rec := session.FileRead{Path: path, SHA256: reply.SHA256, MTime: time.Unix(0, reply.MTimeNano), Size: reply.Size}
	var res *Result
	switch args.Kind {
	case worker.KindImage:
		// The worker sent the base64. What it holds goes only to its own user, and the writer
		// escapes whatever is not plain base64.
		res = &Result{Content: []Block{{Type: "image", MediaType: reply.MediaType, Data: string(payload)}}}
		res.Data = map[string]any{"type": "image", "file": map[string]any{"filePath": path, "type": reply.MediaType, "originalSize": reply.Size}}
	case worker.KindPDF:
		if reply.Pages > readPDFPagesFree && c.Input.String("pages") == "" {
			return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("%s has %d pages; pass pages to read at most %d at a time (e.g. pages: \"1-%d\")", path, reply.Pages, readMaxPDFPages, readPDFPagesFree))
		}
		res = Text(formatPDF(payload, args.FirstPage, reply.Pages))
		res.Data = map[string]any{"type": "pdf", "file": map[string]any{"filePath": path, "numPages": reply.Pages, "firstPage": args.FirstPage, "lastPage": min(args.LastPage, reply.Pages)}}
		rec.Partial = args.FirstPage > 1 || (reply.Pages > 0 && args.LastPage < reply.Pages)
	case worker.KindBytes:
		blocks, err := formatNotebook(path, payload)
		if err != nil {
			return nil, err
		}
		res = &Result{Content: blocks, Data: map[string]any{"type": "notebook", "file": map[string]any{"filePath": path}}}
	default:
		res = readTextResult(path, reply, payload, args, explicit)
		rec.Offset, rec.Limit = args.Offset, args.Limit
		rec.Partial = reply.StartLine > 1 || reply.MoreLines
		if res.IsError {
			return nil, errcode.Msg(errcode.TooLarge, res.Content[0].Text)
		}
	}
	if reply.Path != "" && reply.Path != path {
		// The Unicode-normalized variant of the name was read: remember it under both names.
		rec2 := rec
		rec2.Path = reply.Path
		c.Session.Reads.Record(rec2)
		res.ExtraMessages = append(res.ExtraMessages, fmt.Sprintf("%s does not exist; read %s, whose name differs only in Unicode form or spacing", path, reply.Path))
	}
	c.Session.Reads.Record(rec)
	return res, nil
}

func readTextResult(path string, r *worker.ReadReply, payload []byte, a worker.ReadArgs, explicit bool) *Result {
	data := map[string]any{"type": "text", "file": map[string]any{
		"filePath": path, "numLines": r.Lines, "startLine": r.StartLine, "totalLines": r.TotalLines,
	}}
	var text string
	switch {
	case r.Size == 0:
		text = "<system-reminder>Warning: the file exists but the contents are empty.</system-reminder>"
	case r.Lines == 0 && !r.CutByBytes:
		text = fmt.Sprintf("<system-reminder>Warning: the file exists but is shorter than the provided offset (%d). The file has %d lines.</system-reminder>", a.Offset, r.TotalLines)
	case r.CutByBytes && explicit:
		// COMPAT: an explicit range that is too big is an error, not a silent cut.
		fit := ""
		if r.Lines > 0 {
			fit = fmt.Sprintf(" (about %d lines fit)", r.Lines)
		}
		return &Result{IsError: true, Content: []Block{{Type: "text", Text: fmt.Sprintf("the requested lines of %s (from line %d) are more than one Read returns (%d KB); pass a smaller limit%s, or use Grep to find what you need", path, a.Offset, readMaxOutputBytes>>10, fit)}}}
	case r.CutByBytes:
		text = string(payload) + fmt.Sprintf("\n[PARTIAL view: %s is larger than one Read (%d KB); showing lines %d-%d. Use offset and limit to read the rest, or Grep to find what you need]",
			path, readMaxOutputBytes>>10, r.StartLine, r.StartLine+r.Lines-1)
	case r.MoreLines:
		more := "more lines"
		if r.TotalLines > 0 {
			more = fmt.Sprintf("%d lines in total", r.TotalLines)
		}
		text = string(payload) + fmt.Sprintf("\n[showing lines %d-%d; the file has %s: pass offset=%d to read on]", r.StartLine, r.StartLine+r.Lines-1, more, r.StartLine+r.Lines)
	default:
		text = string(payload)
	}
	if r.LongLines > 0 {
		data["truncatedLines"] = r.LongLines
	}
	res := Text(text)
	res.Data = data
	return res
}

// parsePages parses "3" or "1-5" (1-based, at most readMaxPDFPages pages); "" is 0, 0.
func parsePages(s string) (first, last int, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, nil
	}
	bad := errcode.Msg(errcode.Validation, fmt.Sprintf("pages %q is not a page or a range; pass e.g. \"3\" or \"1-5\" (at most %d pages)", s, readMaxPDFPages))
	a, b, isRange := strings.Cut(s, "-")
	first, err = strconv.Atoi(strings.TrimSpace(a))
	if err != nil || first < 1 {
		return 0, 0, bad
	}
	last = first
	if isRange {
		if last, err = strconv.Atoi(strings.TrimSpace(b)); err != nil || last < first {
			return 0, 0, bad
		}
	}
	if last-first+1 > readMaxPDFPages {
		return 0, 0, errcode.Msg(errcode.Validation, fmt.Sprintf("pages %q spans %d pages; read at most %d per call", s, last-first+1, readMaxPDFPages))
	}
	return first, last, nil
}

func formatPDF(text []byte, first, total int) string {
	pages := bytes.Split(text, []byte("\f"))
	var b strings.Builder
	if total > 0 {
		fmt.Fprintf(&b, "PDF with %d pages.\n", total)
	}
	for i, p := range pages {
		if i == len(pages)-1 && len(bytes.TrimSpace(p)) == 0 {
			break
		}
		fmt.Fprintf(&b, "\n--- Page %d ---\n%s", first+i, bytes.TrimRight(p, "\n"))
	}
	return b.String()
}

type notebook struct {
	Cells    []notebookCell `json:"cells"`
	Metadata struct {
		LanguageInfo struct {
			Name string `json:"name"`
		} `json:"language_info"`
	} `json:"metadata"`
}

type notebookCell struct {
	ID       string           `json:"id"`
	CellType string           `json:"cell_type"`
	Source   json.RawMessage  `json:"source"`
	Outputs  []notebookOutput `json:"outputs"`
}

type notebookOutput struct {
	OutputType string                     `json:"output_type"`
	Text       json.RawMessage            `json:"text"`
	Data       map[string]json.RawMessage `json:"data"`
	Ename      string                     `json:"ename"`
	Evalue     string                     `json:"evalue"`
	Traceback  []string                   `json:"traceback"`
}

// multiline decodes a notebook string field: a string or a list of strings.
func multiline(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil {
		return strings.Join(ss, "")
	}
	return ""
}

const notebookOutputChars = 10_000

// notebookTextBytes bounds the text one notebook Read returns, like any Read's text. It is
// checked as the text is built: a cell's id is written again beside each of its outputs, so a
// notebook of one long id and many tiny outputs (1 MB of file) otherwise made gigabytes of
// text in the daemon before any budget saw it.
const notebookTextBytes = readMaxOutputBytes

// boundedText is a strings.Builder that takes at most left more bytes; past them it keeps
// what fit (cut on a rune boundary) and reports full.
type boundedText struct {
	b    strings.Builder
	left int
	full bool
}

func (t *boundedText) WriteString(s string) {
	if t.full {
		return
	}
	if len(s) > t.left {
		cut := s[:t.left]
		for len(cut) > 0 && !utf8.ValidString(cut) {
			cut = cut[:len(cut)-1]
		}
		s, t.full = cut, true
	}
	t.b.WriteString(s)
	t.left -= len(s)
}

// printf formats only what can still be kept: once full it does no work at all.
func (t *boundedText) printf(format string, args ...any) {
	if !t.full {
		t.WriteString(fmt.Sprintf(format, args...))
	}
}

func formatNotebook(path string, b []byte) ([]Block, error) {
	// Decoded in the daemon: each element becomes a struct or a string (three bytes of `{},`
	// or `null,` an output of a hundred), so the values are counted first, decoding nothing.
	if n := jsonValues(b, notebookMaxValues); n > notebookMaxValues {
		return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s holds more than %d JSON values (cells, outputs, lines and their parts), more than Read takes apart; read it with Bash, e.g. jq '.cells[:50]' %s", path, notebookMaxValues, path))
	}
	var nb notebook
	if err := json.Unmarshal(b, &nb); err != nil {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("%s is not a valid Jupyter notebook (%v); read it as text with Bash cat", path, err))
	}
	lang := nb.Metadata.LanguageInfo.Name
	if lang == "" {
		lang = "python"
	}
	var blocks []Block
	text := &boundedText{left: notebookTextBytes}
	flush := func() {
		if text.b.Len() > 0 {
			blocks = append(blocks, Block{Type: "text", Text: text.b.String()})
			text.b.Reset()
		}
	}
	shown := 0
	for i, cell := range nb.Cells {
		if text.full {
			break
		}
		shown = i + 1
		id := cell.ID
		if id == "" {
			id = fmt.Sprintf("cell-%d", i)
		}
		text.printf("<cell id=%q>", id)
		if cell.CellType != "code" {
			text.printf("<cell_type>%s</cell_type>", cell.CellType)
		} else {
			text.printf("<language>%s</language>", lang)
		}
		text.WriteString(multiline(cell.Source))
		text.printf("</cell id=%q>\n", id)
		for _, o := range cell.Outputs {
			if text.full {
				break
			}
			var out string
			switch o.OutputType {
			case "stream":
				out = multiline(o.Text)
			case "execute_result", "display_data":
				out = multiline(o.Data["text/plain"])
				for _, mt := range []string{"image/png", "image/jpeg"} {
					if img := multiline(o.Data[mt]); img != "" {
						flush()
						blocks = append(blocks, Block{Type: "image", MediaType: mt, Data: strings.ReplaceAll(img, "\n", "")})
					}
				}
			case "error":
				out = o.Ename + ": " + o.Evalue + "\n" + stripANSI(strings.Join(o.Traceback, "\n"))
			}
			if out == "" {
				continue
			}
			if cut := runePrefix(out, notebookOutputChars); len(cut) < len(out) {
				out = cut + "\n[output truncated]"
			}
			text.printf("<output cell=%q>\n%s\n</output>\n", id, strings.TrimRight(out, "\n"))
		}
	}
	if len(nb.Cells) == 0 {
		text.WriteString("<system-reminder>The notebook has no cells.</system-reminder>")
	}
	if text.full {
		text.full, text.left = false, 1<<10
		text.printf("\n[notebook truncated: its text is over %d KB, cut in cell %d of %d; read from there with Bash, e.g. jq '.cells[%d:]' %s]", notebookTextBytes>>10, shown, len(nb.Cells), shown-1, path)
	}
	flush()
	return blocks, nil
}

// notebookMaxValues bounds the JSON values of a notebook Read decodes: real ones hold tens of
// thousands (cells, outputs, their lines), and each costs the daemon up to a hundred bytes.
const notebookMaxValues = 250_000

// jsonValues counts about as many values as the JSON text b holds (each object and array,
// and each element or member past a container's first: its '{', '[' and ',' outside
// strings), stopping past max.
func jsonValues(b []byte, max int) int {
	n, inString := 0, false
	for i := 0; i < len(b) && n <= max; i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++ // the escaped byte, a quote maybe
		case c == '"':
			inString = !inString
		case !inString && (c == '{' || c == '[' || c == ','):
			n++
		}
	}
	return n
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// imageResultBytes is what an image result holds besides its base64: the JSON around it.
const imageResultBytes = 1 << 10

// imageLeftOut is the result for an image the response had room for only room bytes of: a
// note, as the result fitter writes for images it leaves out, and no content (the file is
// not recorded as read).
func imageLeftOut(path string, room int64) *Result {
	return &Result{Content: []Block{{Type: "text", Text: fmt.Sprintf("[image %s left out: this response has room for %s more (limits.response_bytes); read it in a request of its own]", path, humanBytes(room))}},
		Data: map[string]any{"type": "image", "file": map[string]any{"filePath": path}, "leftOut": true}}
}
