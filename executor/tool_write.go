package executor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/worker"
)

const writeSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["file_path", "content"],
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to write (must be absolute, not relative)"},
    "content": {"type": "string", "description": "The content to write to the file"}
  }
}`

func writeDef(h *Host) Def {
	return Def{
		Name: "Write",
		Description: "Writes a file to the local filesystem, replacing it if it exists. Overwriting an existing file requires that this session " +
			"Read it in full first and that it has not changed since. Missing parent directories are created. Prefer Edit for changes to existing files.",
		Schema:           writeSchema,
		Validate:         requireAbs("file_path"),
		Backfill:         backfillPath("file_path", false),
		CheckPermissions: pathFacts(h, "file_path", permission.Write),
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			return h.runWrite(ctx, c)
		},
	}
}

// expectOf is what this session last read of path, for the worker's staleness check.
func expectOf(s *session.Session, path string) (*worker.Expect, session.FileRead, bool) {
	rec, ok := s.Reads.Lookup(path)
	if !ok {
		return nil, rec, false
	}
	return &worker.Expect{SHA256: rec.SHA256, Size: rec.Size, MTimeNano: rec.MTime.UnixNano()}, rec, true
}

func recordWrite(s *session.Session, path string, r *worker.WriteReply, partial bool) {
	s.Reads.Record(session.FileRead{Path: path, SHA256: r.SHA256, MTime: time.Unix(0, r.MTimeNano), Size: r.Size, Partial: partial})
}

// privateTmpWrite refuses a Write, Edit or MultiEdit the daemon runs whose file would land in
// the file worker's own /tmp or /dev/shm: tmpfs mounts of that worker alone, which the
// session's Bash calls (each with its own) and the host never see, so "File created" would
// name a file nothing else can read. A session dir, a cache dir or the results dir under the
// host's /tmp is the host's, mounted over the private one, and is written as any other. An
// agent's own Write, decided for its hook (decide only), writes the host's /tmp itself and
// never comes here.
func (h *Host) privateTmpWrite(c *Call) error {
	switch c.Tool.Name() {
	case "Write", "Edit", "MultiEdit":
	default:
		return nil
	}
	path := expandPath(c, c.Input.String("file_path"))
	s := c.Session
	hostDirs := append(s.Dirs(), h.ResultsDir(s.ID))
	for _, to := range s.LeadsTo() {
		hostDirs = append(hostDirs, to)
	}
	if cfg := h.cfg.Load(); cfg != nil {
		home := s.Owner.Home
		if home == "" {
			home = "/"
		}
		hostDirs = append(hostDirs, expandHome(cfg.CacheDirs, home)...)
	}
	// As asked and where the decision found it leads: a link in a session dir may lead into
	// the private /tmp, and a path there may lead out of it.
	for _, p := range []string{path, c.decidedWrite} {
		for _, tmp := range []string{"/tmp", "/dev/shm"} {
			if p != "" && insideDir(p, tmp) && !slices.ContainsFunc(hostDirs, func(d string) bool { return insideDir(p, d) }) {
				return errcode.Msg(errcode.Validation, fmt.Sprintf("%s is in %s, which is private to each call here: the file tools have their own, and so has each Bash command, so neither your commands nor the user would ever see the file; write it inside the session's directories instead (%s)",
					path, tmp, strings.Join(s.Dirs(), ", ")))
			}
		}
	}
	return nil
}

func (h *Host) runWrite(ctx context.Context, c *Call) (*Result, error) {
	path := expandPath(c, c.Input.String("file_path"))
	content := c.Input.String("content")
	if err := h.privateTmpWrite(c); err != nil {
		return nil, err
	}
	expect, rec, ok := expectOf(c.Session, path)
	if ok && rec.Partial {
		return nil, errcode.Msg(errcode.Stale, fmt.Sprintf("this session read only part of %s (from line %d); Read the whole file (without offset and limit) before overwriting it, or use Edit to change part of it", path, max(rec.Offset, 1)))
	}
	w, err := h.writer(ctx, c.Session, path, c.decidedWrite)
	if err != nil {
		return nil, err
	}
	r, err := w.WriteDecided(ctx, worker.WriteArgs{Path: path, Expect: expect, Decided: c.decidedWrite}, []byte(content))
	if err != nil {
		if errcode.Of(err) == errcode.Stale {
			c.Session.Reads.Forget(path)
		}
		return nil, err
	}
	recordWrite(c.Session, path, r, false)
	kind, text := "update", fmt.Sprintf("The file %s has been updated (%d lines).", path, r.Lines)
	if r.Created {
		kind, text = "create", fmt.Sprintf("File created successfully at: %s", path)
	}
	res := Text(text)
	res.Data = map[string]any{"type": kind, "filePath": path, "lines": r.Lines, "bytes": r.Size}
	return res, nil
}
