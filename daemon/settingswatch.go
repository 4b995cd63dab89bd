package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// settingsRecheck is how often, at most, a session's settings files are looked at again
// before a call.
const settingsRecheck = time.Second

// settingsWatch keeps, per session, the settings files its rules were read from (the user's
// and the project's, found or not) and what they were then. The agents apply an edit of their
// settings files at once, so a deny the user adds mid-conversation must hold from the next
// call: before a call, at most every settingsRecheck, the files are looked at again as the
// owner, and a change rebuilds the session's rules (and its sub-agents'), as an admin reload
// does: what takes something away stops the session's commands.
type settingsWatch struct {
	mu sync.Mutex
	by map[string]*watchedSettings
}

type watchedSettings struct {
	files   []string
	prints  string
	checked time.Time
	// busy: a refresh of the session is under way; another waits for none (the owner's
	// requests, whatever their number, queue one rebuild at most).
	busy bool
}

// readSettings collects, for one load of a session's rules, the files read and what each was
// just before it was read: a change after that shows at the next look.
type readSettings struct {
	mu     sync.Mutex
	files  []string
	prints string
}

func (r *readSettings) add(s *session.Session, path string) {
	o := s.Owner
	p, err := sandbox.FilePrints(o.UID, o.GID, o.Groups, []string{path})
	if err != nil {
		p = "unknown:" + path + ";" // looked at again, and differing, next time
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.files, path) {
		r.files, r.prints = append(r.files, path), r.prints+p
	}
}

// set records what a load of s's rules read.
func (w *settingsWatch) set(id string, r *readSettings) {
	r.mu.Lock()
	ws := &watchedSettings{files: slices.Clone(r.files), prints: r.prints, checked: time.Now()}
	r.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.by == nil {
		w.by = map[string]*watchedSettings{}
	}
	w.by[id] = ws
}

func (w *settingsWatch) has(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.by[id] != nil
}

func (w *settingsWatch) drop(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.by, id)
}

// due returns the files and prints of s's last load when they are to be looked at again now,
// marking them looked at: of calls at once, one looks.
func (w *settingsWatch) due(id string, now time.Time) *watchedSettings {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.by[id]
	if ws == nil || ws.busy || now.Sub(ws.checked) < settingsRecheck {
		return nil
	}
	ws.checked = now
	return ws
}

// setBusy marks id's refresh under way, or done.
func (w *settingsWatch) setBusy(id string, busy bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.by[id]; ws != nil {
		ws.busy = busy
	}
}

// refreshSettings rebuilds s's rules, and its sub-agents', when a settings file they were read
// from changed since (settingsWatch); and the same for each session s lies below, whose rules
// s's hold (inheritedRules): a sub-agent at work sees its parent's files as they are now. The
// change is audited before it applies; a session whose change cannot be recorded is suspended
// until it can, rather than run on rules no record shows.
func (c *Core) refreshSettings(ctx context.Context, s *session.Session) {
	var top *session.Session
	var files []string
	for d := s; d != nil; d = d.Parent {
		ws := c.settings.due(d.ID, time.Now())
		if ws == nil {
			continue
		}
		o := d.Owner
		if now, err := sandbox.FilePrints(o.UID, o.GID, o.Groups, ws.files); err == nil && now == ws.prints {
			continue
		}
		top, files = d, ws.files // the highest changed: rebuilt with all below it
	}
	if top == nil {
		return
	}
	c.settings.setBusy(top.ID, true)
	defer c.settings.setBusy(top.ID, false) // a rebuild set a new entry, not busy, already
	c.log.Info("settings files changed; rebuilding the session's rules", zap.String("session", top.ID))
	detail := map[string]string{"cause": "settings files changed", "files": strings.Join(files, "\n")}
	if err := c.recorder.sessionEvent(ctx, audit.KindSessionUpdate, top, detail); err != nil {
		c.suspend(ctx, top, fmt.Errorf("its settings files changed, and the change could not be recorded: %w", err))
		return
	}
	c.rebuildRules(ctx, func(d *session.Session) bool { return d == top || d.Descends(top) })
}
