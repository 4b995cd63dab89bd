package executor

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

// PreviewChars is the size of the preview that replaces a persisted result.
const PreviewChars = 2000

// MaxPersistedBytes bounds one persisted result file (COMPAT: ≤ 64 MiB); output past it is
// counted, not kept.
const MaxPersistedBytes = 64 << 20

// Budget applies result budgeting, pipeline step 11. A result past its tool's
// MaxResultSizeChars is saved for the session owner and replaced by a <persisted-output>
// block with a preview and the path; then the session's aggregate budget admits the result,
// and the earlier results it pushes out are persisted and listed in
// Data["replaced_results"] ({tool_use_id, path, size, preview}) for the client to swap in.
// It never fails the call: when persisting fails the text is cut with a note instead.
func (h *Host) Budget(c *Call, r *Result) (*Result, error) {
	if r == nil || c == nil || c.Session == nil {
		return r, nil
	}
	limit := DefaultMaxResultSizeChars
	if c.Tool != nil {
		limit = c.Tool.MaxResultSizeChars()
	}
	if limit == Unbounded {
		return r, nil
	}
	if r.TextChars() > limit {
		h.persistResult(c.Session, r, limit)
	}
	chars := int64(r.TextChars())
	// A result no larger than a preview is never replaced by one: it is counted, not kept.
	var evicted []session.BudgetEntry
	if chars > PreviewChars {
		evicted = c.Session.Budget.Admit(c.ToolUseID, chars)
	} else {
		evicted = c.Session.Budget.AdmitSmall(chars)
	}
	ts := h.tools()
	if chars > PreviewChars {
		ts.mu.Lock()
		if ts.budgeted == nil {
			ts.budgeted = map[string]map[string]string{}
		}
		m := ts.budgeted[c.Session.ID]
		if m == nil {
			m = map[string]string{}
			ts.budgeted[c.Session.ID] = m
		}
		m[c.ToolUseID] = joinText(r)
		ts.mu.Unlock()
	}
	var replaced []map[string]any
	for _, e := range evicted {
		ts.mu.Lock()
		text, ok := ts.budgeted[c.Session.ID][e.ToolUseID]
		delete(ts.budgeted[c.Session.ID], e.ToolUseID)
		ts.mu.Unlock()
		if !ok || e.ToolUseID == c.ToolUseID {
			continue
		}
		path, err := h.persistText(c.Session, text)
		if err != nil {
			h.logger().Warn("persist evicted result: " + string(errcode.Of(err)))
			continue
		}
		preview := previewOf(text)
		replaced = append(replaced, map[string]any{
			"tool_use_id": e.ToolUseID, "path": path, "size": len(text), "preview": PersistedBlock(path, int64(len(text)), preview, ""),
		})
		c.Session.Budget.Admit(e.ToolUseID, int64(utf8.RuneCountInString(preview)+200))
	}
	if len(replaced) > 0 {
		if r.Data == nil {
			r.Data = map[string]any{}
		}
		r.Data["replaced_results"] = replaced
	}
	return r, nil
}

func joinText(r *Result) string {
	if len(r.Content) == 1 && r.Content[0].Type == "text" {
		return r.Content[0].Text // no copy of a result that may be 64 MiB
	}
	var b strings.Builder
	for _, bl := range r.Content {
		if bl.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// persistResult replaces the text blocks of r (images stay) with one persisted-output block.
func (h *Host) persistResult(s *session.Session, r *Result, limit int) {
	text := joinText(r)
	var blocks []Block
	path, err := h.persistText(s, text)
	var block string
	if err != nil {
		cut := runePrefix(text, max(0, limit-200))
		block = cut + fmt.Sprintf("\n\n[output truncated: %d characters in total; it could not be saved (%s). Narrow the command or the search to see the rest]", utf8.RuneCountInString(text), errcode.Of(err))
	} else {
		block = PersistedBlock(path, int64(len(text)), previewOf(text), "")
		if r.Data == nil {
			r.Data = map[string]any{}
		}
		r.Data["persistedOutputPath"] = path
		r.Data["persistedOutputSize"] = len(text)
	}
	blocks = append(blocks, Block{Type: "text", Text: block})
	for _, b := range r.Content {
		if b.Type != "text" {
			blocks = append(blocks, b)
		}
	}
	r.Content = blocks
}

func previewOf(text string) string {
	if utf8.RuneCountInString(text) <= PreviewChars {
		return text
	}
	cut := runePrefix(text, PreviewChars)
	if i := strings.LastIndexByte(cut, '\n'); i > PreviewChars/2 {
		cut = cut[:i]
	}
	return cut
}

// runePrefix is s cut after n characters, without converting the rest: a result being
// persisted may be 64 MiB, and its []rune four times that, in the daemon's own memory.
func runePrefix(s string, n int) string {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i]
}

// PersistedBlock is the text that stands for a persisted output: the path to Read it from,
// its size and a preview.
func PersistedBlock(path string, size int64, preview, note string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<persisted-output>\nOutput too large (%s). Full output saved to: %s\nRead it with the Read tool (offset/limit to page) or search it with Grep.", humanBytes(size), path)
	if note != "" {
		b.WriteString("\n" + note)
	}
	fmt.Fprintf(&b, "\n\nPreview (first %s):\n%s\n…\n</persisted-output>", humanBytes(int64(len(preview))), preview)
	return b.String()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// persistText saves text for the session owner and returns its path.
func (h *Host) persistText(s *session.Session, text string) (string, error) {
	if err := h.roomFor(int64(len(text))); err != nil {
		return "", err
	}
	f, err := h.createResultFile(s)
	if err != nil {
		return "", err
	}
	// Written and hashed a slice at a time: []byte(text) would copy what may be 64 MiB again.
	hf := &hashingFile{f: f, h: sha256.New()}
	for rest := text; rest != ""; rest = rest[min(len(rest), 1<<20):] {
		if _, err := io.WriteString(hf, rest[:min(len(rest), 1<<20)]); err != nil {
			hf.discard()
			return "", errcode.New(errcode.Of(err), fmt.Errorf("write persisted result: %w", err))
		}
	}
	path, err := hf.finish()
	if err != nil {
		return "", err
	}
	if err := h.account(s, path, int64(len(text))); err != nil {
		return "", err
	}
	return path, nil
}

// WARNING: the daemon creates files as root in a directory the owner can traverse; this is
// where a symlink or a pre-created entry could turn it into a confused deputy. Rerun
// TestBashTool/large_output_persisted_and_readable as root after changing.
//
// resultsDir creates <state>/tool-results/<session>, root-owned: tool-results 0711, the
// session's dir 0700 with an ACL that lets its owner, and no other user, search it. The owner
// can open the files in it by name but not list, add, rename or remove entries; another user,
// who may know the session's id (ps shows it on sbctl's command line), cannot even stat a file
// there, whose content-addressed name would tell a guessed output's size and time.
func (h *Host) resultsDir(s *session.Session) (string, error) {
	if h.StateDir == "" {
		return "", errcode.Msg(errcode.Unavailable, "the daemon has no state directory, so large results cannot be saved; narrow the command or search")
	}
	if !validSessionID(s.ID) {
		return "", errcode.Msg(errcode.Internal, "invalid session id")
	}
	if s.Closed() {
		// StopSession removed (or is removing) its results: a file made now would be left
		// behind, on no ledger.
		return "", errSessionClosed(s)
	}
	root := filepath.Join(h.StateDir, "tool-results")
	dir := h.ResultsDir(s.ID)
	if _, ok := h.resultsMade.Load(s.ID); ok {
		// Made and checked by an earlier call; only root can have removed it since, and then
		// the full path below makes it again.
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	for _, d := range []string{root, dir} {
		mode := os.FileMode(0o711)
		if d == dir {
			mode = 0o700
		}
		if err := os.Mkdir(d, mode); err != nil && !errors.Is(err, fs.ErrExist) {
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				// Not the caller's doing, nor theirs to fix: the state volume (blocks, or the
				// inodes that users' files on it can take) is full.
				return "", errcode.New(errcode.Unavailable, fmt.Errorf("the daemon's state volume has no room for this session's results directory (out of space or inodes); an administrator must free some, and should give the state directory a volume of its own: %w", err))
			}
			return "", errcode.New(errcode.Of(err), fmt.Errorf("create results directory: %w", err))
		}
		fi, err := os.Lstat(d)
		if err != nil {
			return "", errcode.New(errcode.Of(err), fmt.Errorf("results directory: %w", err))
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
			return "", errcode.Msg(errcode.PermissionDenied, "results directory is not a directory owned by the daemon; ask the administrator to check the state directory")
		}
		if d == root {
			if fi.Mode().Perm() != 0o711 {
				_ = os.Chmod(d, 0o711) // umask may have narrowed it
			}
			continue
		}
		if err := ownerSearches(d, s.Owner.UID); err != nil {
			return "", err
		}
	}
	h.resultsMade.Store(s.ID, struct{}{})
	return dir, nil
}

// createResultFile opens a new, empty file for the session owner in its results directory,
// under a temporary name; finishResultFile gives it its content-addressed name. The file stays
// the daemon's: a file of the owner's own in the state volume (where the audit log lives) could
// be grown without end from the owner's shell, whatever persisted_bytes_per_user counted. The
// owner reads it through an ACL entry, which lets it neither write nor change the mode.
func (h *Host) createResultFile(s *session.Session) (*os.File, error) {
	dir, err := h.resultsDir(s)
	if err != nil {
		return nil, err
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	name := filepath.Join(dir, ".partial-"+hex.EncodeToString(rnd[:]))
	// O_EXCL|O_NOFOLLOW: never follow or reuse an entry, even in our own directory.
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, errcode.New(errcode.Of(err), fmt.Errorf("create result file: %w", err))
	}
	if uid := s.Owner.UID; int(uid) != os.Geteuid() {
		if err := grantRead(f, uid); err != nil {
			f.Close()
			os.Remove(name)
			return nil, err
		}
	}
	return f, nil
}

// POSIX ACL entries as the kernel takes them in system.posix_acl_access (linux/posix_acl_xattr.h).
const (
	aclXattrVersion = 2
	aclUserObj      = 0x01
	aclUser         = 0x02
	aclGroupObj     = 0x04
	aclMask         = 0x10
	aclOther        = 0x20
	aclUndefinedID  = 0xffffffff
)

// ownerSearches makes dir (the daemon's) searchable by uid and by no other user: mode 0700
// and, for a uid other than the daemon's, the ACL owner rwx, user uid x (mode 0710, mask x).
func ownerSearches(dir string, uid uint32) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errcode.New(errcode.Of(err), fmt.Errorf("results directory: %w", err))
	}
	defer unix.Close(fd)
	if int(uid) == os.Geteuid() {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return errcode.New(errcode.Of(err), fmt.Errorf("results directory: %w", err))
		}
		return nil
	}
	return setACL(fd, 7, 1, uid, "let the owner reach its results directory")
}

// grantRead gives uid read access to f, whose owner stays the daemon: owner rw, user uid r,
// nobody else anything (mode 0640 with the mask r, group empty).
func grantRead(f *os.File, uid uint32) error {
	return setACL(int(f.Fd()), 6, 4, uid, "let the owner read the result file")
}

// setACL sets fd's access ACL to the daemon's ownerPerm, uid's userPerm and nothing for
// anyone else (group empty, the mask userPerm).
func setACL(fd int, ownerPerm, userPerm uint16, uid uint32, what string) error {
	var acl []byte
	add := func(tag, perm uint16, id uint32) {
		acl = binary.LittleEndian.AppendUint16(acl, tag)
		acl = binary.LittleEndian.AppendUint16(acl, perm)
		acl = binary.LittleEndian.AppendUint32(acl, id)
	}
	acl = binary.LittleEndian.AppendUint32(acl, aclXattrVersion)
	add(aclUserObj, ownerPerm, aclUndefinedID)
	add(aclUser, userPerm, uid)
	add(aclGroupObj, 0, aclUndefinedID)
	add(aclMask, userPerm, aclUndefinedID)
	add(aclOther, 0, aclUndefinedID)
	if err := unix.Fsetxattr(fd, "system.posix_acl_access", acl, 0); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return errcode.Msg(errcode.Unavailable, "the state directory's filesystem has no POSIX ACLs, which sandboxd needs to let a user read a saved result it may not write; ask the administrator to mount it with ACLs")
		}
		return errcode.New(errcode.Of(err), fmt.Errorf("%s: %w", what, err))
	}
	return nil
}

// finishResultFile closes f and renames it to <sum>.txt; an identical result already there
// is reused.
func finishResultFile(f *os.File, sum string) (string, error) {
	tmp := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", errcode.New(errcode.Of(err), fmt.Errorf("close result file: %w", err))
	}
	final := filepath.Join(filepath.Dir(tmp), sum+".txt")
	if _, err := os.Lstat(final); err == nil {
		os.Remove(tmp)
		return final, nil
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", errcode.New(errcode.Of(err), fmt.Errorf("name result file: %w", err))
	}
	return final, nil
}

// hashingFile is a result file being written with its running hash.
type hashingFile struct {
	f *os.File
	h hash.Hash
	n int64
}

func (hf *hashingFile) Write(p []byte) (int, error) {
	n, err := hf.f.Write(p)
	hf.h.Write(p[:n])
	hf.n += int64(n)
	return n, err
}

func (hf *hashingFile) finish() (string, error) {
	return finishResultFile(hf.f, hex.EncodeToString(hf.h.Sum(nil)))
}

func (hf *hashingFile) discard() {
	hf.f.Close()
	os.Remove(hf.f.Name())
}
