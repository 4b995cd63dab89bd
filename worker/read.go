package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
	"golang.org/x/text/unicode/norm"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// Defaults of ReadArgs fields left zero.
const (
	DefaultMaxLineChars   = 2000
	DefaultLimit          = 2000
	DefaultMaxOutputBytes = 256 << 10
	DefaultMaxFileBytes   = 20 << 20
	DefaultHashLimit      = 64 << 20
)

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileInfo(path string, fi fs.FileInfo) FileInfo {
	info := FileInfo{Path: path, Size: fi.Size(), MTimeNano: fi.ModTime().UnixNano(), Mode: uint32(fi.Mode())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.UID = st.Uid
	}
	return info
}

// WARNING: every read goes through here or openDecided so that devices, FIFOs, sockets and
// /proc are refused before they are opened (opening a FIFO blocks, reading /dev/zero never
// ends); rerun TestReadSpecialRefusedInstantly and TestReadDevicesRefusedInstantly as root
// after changing.
//
// openRegular opens path for reading if it is a regular file. It opens that name only: a
// missing path is an error that suggests near names, none that deny matches, never a silent
// read of a variant (Read gets variants decided first, through a resolve with Fallback, and
// opens with openDecided).
func openRegular(path string, deny denySet) (*os.File, fs.FileInfo, error) {
	if !filepath.IsAbs(path) {
		return nil, nil, errcode.Msg(errcode.Validation, fmt.Sprintf("path %q is not absolute; pass an absolute path", path))
	}
	path = filepath.Clean(path)
	if under(path, "/proc") {
		return nil, nil, refuseSpecial(path, SpecialProc)
	}
	fi, err := os.Stat(path)
	if err != nil {
		if isNotExist(err) {
			return nil, nil, notExist(path, deny)
		}
		return nil, nil, errcode.New(errcode.Of(err), fmt.Errorf("stat %s: %w", path, unwrapPath(err)))
	}
	if fi.IsDir() {
		return nil, nil, isDirError(path)
	}
	if s := specialOf(fi.Mode()); s != "" || !fi.Mode().IsRegular() {
		if s == "" {
			s = "special file"
		}
		return nil, nil, refuseSpecial(path, s)
	}
	// Symlinks into /proc (e.g. a link to /proc/self/environ) are refused like /proc itself.
	if r, err := filepath.EvalSymlinks(path); err == nil && under(r, "/proc") {
		return nil, nil, refuseSpecial(path, SpecialProc)
	}
	// O_NONBLOCK and O_NOCTTY in case the path was swapped for a FIFO or tty after the stat;
	// the fstat below then refuses it without ever blocking.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, errcode.New(errcode.Of(err), fmt.Errorf("open %s: %w", path, unwrapPath(err)))
	}
	fi, err = f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, refuseSpecial(path, "special file")
	}
	return f, fi, nil
}

// WARNING: this is how Read opens only what the policy decided on (issue 16, item 7); rerun
// TestReadOpensOnlyTheDecidedFile and the executor's TestReadDecidesOnWhatItOpens as root
// after changing.
//
// openDecided opens the file a resolve of path found, d, and nothing else: d's resolved path
// with no symlink followed on the way (openat2 RESOLVE_NO_SYMLINKS; O_NOFOLLOW where the
// kernel has no openat2), then fstat must show the device and inode the resolve saw. A path
// swapped after the decision (a new symlink, a renamed or replaced file) is refused, never
// followed. The file's name in errors and in the reply is the one decided on: d.Variant when
// the resolve fell back to it, else path. A missing file's near names are suggested unless
// deny matches them.
func openDecided(path string, d *Resolved, deny denySet) (*os.File, fs.FileInfo, error) {
	if !filepath.IsAbs(path) || !filepath.IsAbs(d.Resolved) {
		return nil, nil, errcode.Msg(errcode.Validation, fmt.Sprintf("path %q is not absolute; pass an absolute path", path))
	}
	name := filepath.Clean(path)
	if d.Variant != "" {
		name = d.Variant
	}
	switch {
	case !d.Exists:
		// Missing when decided: a file created since was not decided on.
		return nil, nil, notExist(name, deny)
	case d.Special != "":
		return nil, nil, refuseSpecial(name, d.Special)
	case under(d.Resolved, "/proc"):
		return nil, nil, refuseSpecial(name, SpecialProc)
	case d.IsDir:
		return nil, nil, isDirError(name)
	case d.Ino == 0:
		return nil, nil, errcode.Msg(errcode.Internal, fmt.Sprintf("refused to read %s: the decision on it does not say which file it is; try again", name))
	}
	f, fi, err := openResolved(d, name, changedError(name))
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, refuseSpecial(name, "special file")
	}
	return f, fi, nil
}

// openResolved opens d.Resolved, the file or directory a resolve found, and nothing else: no
// symlink followed on the way (openat2 RESOLVE_NO_SYMLINKS; O_NOFOLLOW where the kernel has
// no openat2), then fstat must show the device and inode the resolve saw, else changed. name
// is the path shown in errors.
func openResolved(d *Resolved, name string, changed error) (*os.File, fs.FileInfo, error) {
	// O_NONBLOCK and O_NOCTTY in case the path was swapped for a FIFO or tty since the
	// decision; the fstat below then refuses it without ever blocking.
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	fd, err := unix.Openat2(unix.AT_FDCWD, d.Resolved, &unix.OpenHow{
		Flags:   uint64(flags),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) {
		// Kernels before 5.6: the last component at least is not followed, and the inode
		// check below catches a swapped parent.
		fd, err = unix.Open(d.Resolved, flags|unix.O_NOFOLLOW, 0)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.EXDEV) {
			return nil, nil, changed
		}
		return nil, nil, errcode.New(errcode.Of(err), fmt.Errorf("open %s: %w", name, err))
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, errcode.New(errcode.Of(err), fmt.Errorf("stat %s: %w", name, unwrapPath(err)))
	}
	if dev, ino := devIno(fi); dev != d.Dev || ino != d.Ino {
		f.Close()
		return nil, nil, changed
	}
	return f, fi, nil
}

// slashEnd refuses a path ending in "/" (other than "/" itself) as the kernel would open it:
// a directory is EISDIR, any other file ENOTDIR, and a missing one is missing (to a write, a
// directory's name). filepath.Clean drops the slash, and with it the caller's word that the
// path is a directory: a read of ".../e.txt/" would read e.txt, a write to ".../newdir/" make
// a file named newdir.
func slashEnd(path string, write bool) error {
	if len(path) <= 1 || !strings.HasSuffix(path, "/") {
		return nil
	}
	name := filepath.Clean(path)
	fi, err := os.Stat(name)
	switch {
	case err == nil && fi.IsDir():
		if write {
			return errcode.Msg(errcode.ErrnoEISDIR, fmt.Sprintf("%s is a directory; give a file path", path))
		}
		return isDirError(path)
	case err == nil:
		return errcode.Msg(errcode.ErrnoENOTDIR, fmt.Sprintf("%s: not a directory (%s is a file, and the path ends in /); drop the trailing slash to name the file", path, name))
	case write:
		return errcode.Msg(errcode.ErrnoEISDIR, fmt.Sprintf("%s ends in /, so it names a directory, not a file; give a file path without the trailing slash", path))
	default:
		return errcode.Msg(errcode.ErrnoENOENT, fmt.Sprintf("file does not exist: %s (and a file path does not end in /)", path))
	}
}

// changedError refuses a file that is no longer the one the policy decided on.
func changedError(name string) error {
	return errcode.Msg(errcode.Conflict, fmt.Sprintf("refused to read %s: it changed between the permission decision and the read (a different file, or a symlink, is there now); read it again to have the new one decided", name))
}

// notExist is the error for a missing path, suggesting near names that deny does not match
// (a name a Read deny rule hides is not to be shown, even as a guess).
func notExist(path string, deny denySet) error {
	msg := fmt.Sprintf("file does not exist: %s.", path)
	if near := nearNames(path, deny); len(near) > 0 {
		msg += " Did you mean " + strings.Join(near, " or ") + "?"
	} else {
		msg += " Check the path, or use Glob to find the file."
	}
	return errcode.Msg(errcode.ErrnoENOENT, msg)
}

func isDirError(path string) error {
	return errcode.Msg(errcode.ErrnoEISDIR, fmt.Sprintf("%s is a directory, not a file; use Glob (pattern \"*\" with this path) or Bash `ls` to list it", path))
}

func refuseSpecial(path, kind string) error {
	return errcode.Msg(errcode.PermissionDenied, fmt.Sprintf("refused to read %s: it is a %s, not a regular file, and reading it could block or never end; read regular files only (for a device's properties use Bash `stat`)", path, kind))
}

// unwrapPath drops the *PathError's own "op path:" prefix, since the message already names both.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// unicodeVariant returns an existing variant of path's name: NFC or NFD, or with narrow
// no-break spaces (macOS screenshot names: "at 10.00.00\u202fAM") or no-break spaces where
// the agent typed plain ones.
func unicodeVariant(path string) string {
	dir, base := filepath.Split(path)
	for _, v := range []string{norm.NFC.String(base), norm.NFD.String(base)} {
		if v != base {
			if _, err := os.Lstat(dir + v); err == nil {
				return dir + v
			}
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return ""
	}
	defer d.Close()
	names, _ := d.Readdirnames(10000)
	want := canonName(base)
	for _, n := range names {
		if n != base && canonName(n) == want {
			return dir + n
		}
	}
	return ""
}

// canonName is a name in NFC with every kind of space made plain.
func canonName(s string) string {
	return spaces.Replace(norm.NFC.String(s))
}

var spaces = strings.NewReplacer("\u202f", " ", "\u00a0", " ", "\u2007", " ")

// nearNames suggests up to three names in path's directory that look like its name: same
// name in another case or normalization, same stem with another extension, or a small edit.
// Names deny matches, where they are named or where their directory really is, are left out.
func nearNames(path string, deny denySet) []string {
	dir, base := filepath.Split(path)
	realDir := dir
	if len(deny) > 0 {
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			realDir = r
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(10000)
	want := fold(base)
	wantStem := strings.TrimSuffix(want, filepath.Ext(want))
	type cand struct {
		name string
		dist int
	}
	var cs []cand
	for _, n := range names {
		f := fold(n)
		dist := -1
		switch {
		case f == want:
			dist = 0
		case strings.TrimSuffix(f, filepath.Ext(f)) == wantStem:
			dist = 1
		default:
			if d := editDistance(f, want, 3); d <= 2 || (len(want) > 12 && d <= 3) {
				dist = 1 + d
			}
		}
		if dist >= 0 && !deny.match(filepath.Join(dir, n)) && !deny.match(filepath.Join(realDir, n)) {
			cs = append(cs, cand{n, dist})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].dist != cs[j].dist {
			return cs[i].dist < cs[j].dist
		}
		return cs[i].name < cs[j].name
	})
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, filepath.Join(dir, cs[i].name))
	}
	return out
}

func fold(s string) string {
	return strings.ToLower(canonName(s))
}

// editDistance is the Levenshtein distance of a and b in runes, or max+1 once it exceeds max.
func editDistance(a, b string, max int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > max || -d > max {
		return max + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > max {
			return max + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// boundedReader reads at most left bytes of r, and stops with ctx's error once ctx ends. Every
// read of a file goes through one: a file another process keeps extending (truncate -s +1G
// makes gigabytes of holes in a moment) would otherwise be read for as long as it grows, long
// after the caller gave up.
type boundedReader struct {
	ctx  context.Context
	r    io.Reader
	left int64
}

// boundedChunk bounds one Read, so that ctx is looked at after every megabyte however large
// the caller's buffer (io.ReadAll's grows to the file's size).
const boundedChunk = 1 << 20

func (b *boundedReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if b.left <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.left, boundedChunk)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// readAllLimit reads f to its end, at most limit bytes (more is TooLarge), stopping when ctx
// ends.
func readAllLimit(ctx context.Context, f *os.File, limit int64) ([]byte, error) {
	b, err := io.ReadAll(&boundedReader{ctx: ctx, r: f, left: limit + 1})
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("read %s: %w", f.Name(), unwrapPath(err)))
	}
	if int64(len(b)) > limit {
		return nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s grew past %d bytes while being read; try again", f.Name(), limit))
	}
	return b, nil
}

func doRead(ctx context.Context, a *ReadArgs) (*ReadReply, []byte, error) {
	if err := slashEnd(a.Path, false); err != nil {
		return nil, nil, err
	}
	var f *os.File
	var fi fs.FileInfo
	var err error
	if a.Decided != nil {
		f, fi, err = openDecided(a.Path, a.Decided, a.Deny)
	} else {
		f, fi, err = openRegular(a.Path, a.Deny)
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if a.MaxFileBytes <= 0 {
		a.MaxFileBytes = DefaultMaxFileBytes
	}
	if a.HashLimit <= 0 {
		a.HashLimit = DefaultHashLimit
	}
	reply := &ReadReply{FileInfo: fileInfo(f.Name(), fi)}
	switch a.Kind {
	case KindText, "":
		out, err := readText(ctx, f, fi, a, reply)
		return reply, out, err
	case KindImage, KindBytes, KindPDF:
		if fi.Size() > a.MaxFileBytes {
			return nil, nil, errcode.Msg(errcode.TooLarge, fmt.Sprintf("%s is %d bytes, more than the %d this tool reads; use Bash to inspect or convert it", f.Name(), fi.Size(), a.MaxFileBytes))
		}
		b, err := readAllLimit(ctx, f, a.MaxFileBytes)
		if err != nil {
			return nil, nil, err
		}
		reply.SHA256 = sha256hex(b)
		reply.Size = int64(len(b))
		switch a.Kind {
		case KindImage:
			reply.MediaType = SniffImage(b)
			if reply.MediaType == "" {
				return nil, nil, errcode.Msg(errcode.Validation, fmt.Sprintf("%s is not a PNG, JPEG, GIF or WebP image (its bytes say otherwise); inspect it with Bash `file`", f.Name()))
			}
			enc := make([]byte, base64.StdEncoding.EncodedLen(len(b)))
			base64.StdEncoding.Encode(enc, b)
			return reply, enc, nil
		case KindPDF:
			text, pages, err := pdfText(ctx, f, a)
			if err != nil {
				return nil, nil, err
			}
			reply.Pages = pages
			return reply, text, nil
		}
		return reply, b, nil
	}
	return nil, nil, errcode.Msg(errcode.BadRequest, "unknown read kind "+a.Kind)
}

// SniffImage returns the media type of PNG, JPEG, GIF and WebP bytes by their magic, or "".
func SniffImage(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[0:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// readText formats the selected lines cat -n style. Small files are read whole in one
// syscall (hashed for the read state); larger ones are streamed, hashed up to HashLimit.
// A streamed file is read no further than its size when opened (fi): a file that grows
// meanwhile is shown and hashed as it was then, and the hash no longer matching the file
// makes a later edit read it again. Reading stops when ctx ends.
func readText(ctx context.Context, f *os.File, fi fs.FileInfo, a *ReadArgs, reply *ReadReply) ([]byte, error) {
	if a.Offset <= 0 {
		a.Offset = 1
	}
	if a.Limit <= 0 {
		a.Limit = DefaultLimit
	}
	if a.MaxLineChars <= 0 {
		a.MaxLineChars = DefaultMaxLineChars
	}
	if a.MaxOutputBytes <= 0 {
		a.MaxOutputBytes = DefaultMaxOutputBytes
	}
	var src io.Reader = &boundedReader{ctx: ctx, r: f, left: fi.Size()}
	h := sha256.New()
	hashing := fi.Size() <= a.HashLimit
	wholeLines := -1
	if fi.Size() <= 1<<20 {
		b, err := readAllLimit(ctx, f, a.HashLimit)
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(b[:min(len(b), 8192)], 0) >= 0 {
			return nil, binaryError(f.Name())
		}
		h.Write(b)
		reply.SHA256 = hex.EncodeToString(h.Sum(nil))
		reply.Size = int64(len(b))
		hashing = false
		src = bytes.NewReader(b)
		wholeLines = bytes.Count(b, []byte("\n"))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			wholeLines++
		}
	} else if hashing {
		src = io.TeeReader(src, h)
	}
	br := bufio.NewReaderSize(src, 64<<10)
	if head, _ := br.Peek(8192); bytes.IndexByte(head, 0) >= 0 {
		return nil, binaryError(f.Name())
	}
	out := bytes.NewBuffer(make([]byte, 0, min(fi.Size()+fi.Size()/4+64, a.MaxOutputBytes+128)))
	maxLineBytes := a.MaxLineChars * utf8.UTFMax
	line := make([]byte, 0, 256)
	n := 0
	last := a.Offset + a.Limit - 1
	reply.StartLine = a.Offset
	var numBuf [24]byte
	for {
		line = line[:0]
		tooLong := false
		var err error
		for {
			var frag []byte
			frag, err = br.ReadSlice('\n')
			if len(line)+len(frag) <= maxLineBytes+1 {
				line = append(line, frag...)
			} else {
				line = append(line, frag[:max(0, maxLineBytes+1-len(line))]...)
				tooLong = true
			}
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if err != nil && err != io.EOF {
			return nil, errcode.New(errcode.Of(err), fmt.Errorf("read %s: %w", f.Name(), unwrapPath(err)))
		}
		if len(line) == 0 && err == io.EOF {
			break
		}
		n++
		if n >= a.Offset && n <= last && !reply.CutByBytes {
			text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			cut := tooLong
			if utf8.RuneCount(text) > a.MaxLineChars {
				text = text[:runeOffset(text, a.MaxLineChars)]
				cut = true
			}
			need := len(text) + 8 + 64
			if int64(out.Len()+need) > a.MaxOutputBytes {
				reply.CutByBytes = true
				reply.MoreLines = true
			} else {
				num := strconv.AppendInt(numBuf[:0], int64(n), 10)
				for i := len(num); i < 6; i++ {
					out.WriteByte(' ')
				}
				out.Write(num)
				out.WriteByte('\t')
				out.Write(text)
				if cut {
					reply.LongLines++
					out.WriteString("… [line truncated at " + strconv.Itoa(a.MaxLineChars) + " characters]")
				}
				out.WriteByte('\n')
				reply.Lines++
			}
		}
		if n > last || reply.CutByBytes {
			reply.MoreLines = true
			if !hashing {
				break
			}
		}
		if err == io.EOF {
			break
		}
	}
	if wholeLines >= 0 {
		reply.TotalLines = wholeLines
	} else if reply.MoreLines && !hashing {
		reply.TotalLines = 0 // unknown: the scan stopped early
	} else {
		reply.TotalLines = n
	}
	if hashing {
		reply.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return out.Bytes(), nil
}

func runeOffset(b []byte, runes int) int {
	i := 0
	for r := 0; r < runes && i < len(b); r++ {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return i
}

func binaryError(path string) error {
	return errcode.Msg(errcode.Validation, fmt.Sprintf("%s looks binary (it has NUL bytes); this tool reads text, images (PNG, JPEG, GIF, WebP), PDFs and notebooks; inspect it with Bash (`file`, `xxd | head`)", path))
}

// pdfText extracts the selected pages of the open file f with poppler's pdftotext, run here
// inside the worker's confinement as the owner; pages are separated by form feeds. The tools
// get f itself as fd 3 (/dev/fd/3), not its name, so they read the file that was decided on
// even if the name was swapped since.
func pdfText(ctx context.Context, f *os.File, a *ReadArgs) ([]byte, int, error) {
	const path = "/dev/fd/3"
	name := f.Name()
	if _, err := exec.LookPath("pdftotext"); err != nil {
		return nil, 0, errcode.Msg(errcode.Unavailable, "reading PDFs needs pdftotext (Debian package poppler-utils), which is not installed; ask the administrator, or convert the PDF with Bash")
	}
	infoCmd := exec.CommandContext(ctx, "pdfinfo", path)
	infoCmd.ExtraFiles = []*os.File{f}
	// The document's metadata is the author's text: keep only what the page count needs, so
	// a PDF with megabytes of metadata cannot grow the worker (issue 17).
	var info bytes.Buffer
	infoCmd.Stdout = &limitedBuffer{buf: &info, max: pdfInfoMaxBytes}
	err := infoCmd.Run()
	pages := 0
	if err == nil {
		for _, l := range strings.Split(info.String(), "\n") {
			if v, ok := strings.CutPrefix(l, "Pages:"); ok {
				pages, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
	}
	args := []string{"-enc", "UTF-8"}
	if a.FirstPage > 0 {
		args = append(args, "-f", strconv.Itoa(a.FirstPage))
	}
	if a.LastPage > 0 {
		args = append(args, "-l", strconv.Itoa(a.LastPage))
	}
	args = append(args, path, "-")
	cmd := exec.CommandContext(ctx, "pdftotext", args...)
	cmd.ExtraFiles = []*os.File{f}
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4096}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, errcode.New(errcode.Internal, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, errcode.New(errcode.Unavailable, fmt.Errorf("start pdftotext: %w", err))
	}
	text, rerr := io.ReadAll(io.LimitReader(stdout, a.MaxOutputBytes+1))
	if int64(len(text)) > a.MaxOutputBytes {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, pages, errcode.Msg(errcode.TooLarge, fmt.Sprintf("the text of those pages is more than %d bytes; ask for fewer pages (pages: \"1-3\")", a.MaxOutputBytes))
	}
	werr := cmd.Wait()
	if rerr != nil || werr != nil {
		return nil, pages, errcode.Msg(errcode.ToolFailed, fmt.Sprintf("pdftotext could not read %s: %s; check the file is a valid PDF and the page range exists (the document has %d pages)", name, strings.TrimSpace(stderr.String()), pages))
	}
	return text, pages, nil
}

// pdfInfoMaxBytes bounds what is kept of pdfinfo's output.
const pdfInfoMaxBytes = 64 << 10

// limitedBuffer keeps the first max bytes written and drops the rest, so a chatty child
// cannot grow the worker's memory.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
