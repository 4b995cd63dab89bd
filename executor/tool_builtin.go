package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
)

// BuiltinDefs returns the Def of every built-in tool: Bash, BashOutput, KillShell, Read,
// Write, Edit, MultiEdit, Glob, Grep, WebFetch, ToolSearch, EnterPlanMode, ExitPlanMode.
// ToolSearch lists h.Tools().Registry.
func BuiltinDefs(h *Host) []Def {
	return []Def{
		bashDef(h), bashOutputDef(h), killShellDef(h),
		readDef(h), writeDef(h), editDef(h), multiEditDef(h),
		globDef(h), grepDef(h), webFetchDef(h),
		toolSearchDef(h), enterPlanModeDef(h), exitPlanModeDef(h),
	}
}

func always(Input) bool { return true }

// expandPath makes p absolute the way Claude Code does: ~ is the owner's home, a relative
// path is relative to the session's cwd; the result is cleaned.
func expandPath(c *Call, p string) string { return filepath.Clean(absPath(c, p)) }

// absPath is expandPath without the cleaning: the path as a program is handed it.
func absPath(c *Call, p string) string {
	switch {
	case p == "~":
		return c.Session.Owner.Home
	case strings.HasPrefix(p, "~/"):
		return c.Session.Owner.Home + "/" + p[2:]
	case !filepath.IsAbs(p):
		return c.Session.Cwd() + "/" + p
	}
	return p
}

// rawPath is key's path as the client sent it, made absolute as expandPath makes it but not
// cleaned, or "" when cleaning changes nothing (or no such string was sent).
func rawPath(c *Call, key string) string {
	var in map[string]json.RawMessage
	var p string
	if json.Unmarshal(c.Original, &in) != nil || json.Unmarshal(in[key], &p) != nil || p == "" {
		return ""
	}
	if p = absPath(c, p); p == filepath.Clean(p) {
		return ""
	}
	return p
}

// rawFact is, for a call its caller runs itself, the fact of key's path as sent, when
// cleaning it changed it: the agent's own tool may open it as sent, and the kernel takes a
// `..` after a symlink from where the link leads (/tmp/link/../secret is not /tmp/secret).
func (h *Host) rawFact(c *Call, key string, access permission.Access) (*permission.PathFact, error) {
	if !c.unconfined {
		return nil, nil
	}
	raw := rawPath(c, key)
	if raw == "" {
		return nil, nil
	}
	r, err := h.resolveOnHost(c, raw)
	if err != nil {
		return nil, err
	}
	return &permission.PathFact{Requested: raw, Resolved: r.Resolved, Access: access, Special: r.Special}, nil
}

// backfillPath fills key with its absolute form; an absent key (optional path) becomes the cwd
// when def is set.
func backfillPath(key string, defCwd bool) func(c *Call) error {
	return func(c *Call) error {
		p := c.Input.String(key)
		if p == "" {
			if !defCwd {
				return nil
			}
			p = c.Session.Cwd()
		}
		c.Input[key] = expandPath(c, p)
		return nil
	}
}

// pathFacts resolves key as the owner for the policy.
func pathFacts(h *Host, key string, access permission.Access) func(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	return func(ctx context.Context, c *Call) (permission.ToolFacts, error) {
		p := c.Input.String(key)
		if p == "" {
			return permission.ToolFacts{}, nil
		}
		p = expandPath(c, p)
		resolved, special, err := h.resolveFor(ctx, c, p)
		if err != nil {
			return permission.ToolFacts{}, fmt.Errorf("resolve %s as the session owner: %w", p, err)
		}
		if access == permission.Write {
			c.decidedWrite = resolved
		}
		facts := []permission.PathFact{{Requested: p, Resolved: resolved, Access: access, Special: special}}
		raw, err := h.rawFact(c, key, access)
		if err != nil {
			return permission.ToolFacts{}, err
		}
		if raw != nil {
			facts = append(facts, *raw)
		}
		return permission.ToolFacts{Paths: facts}, nil
	}
}

// cwdRelative is requireAbs for Glob's and Grep's path, which the agents take relative to
// their cwd as well (rg's PATH): a relative one is made absolute against the session's cwd,
// as the agent's own tool would, before anything decides on it. One with a `..` component is
// refused: cleaned here it would name another file than the one the kernel opens past a link.
func cwdRelative(key string) func(ctx context.Context, c *Call) error {
	abs := requireAbs(key)
	return func(ctx context.Context, c *Call) error {
		p := c.Input.String(key)
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "~") || strings.IndexByte(p, 0) >= 0 ||
			slices.Contains(strings.Split(p, "/"), "..") {
			return abs(ctx, c)
		}
		c.Input[key] = filepath.Join(c.Session.Cwd(), p)
		return pathTooLong(key, c.Input.String(key))
	}
}

// maxPathBytes is the most a path given to a file tool may hold: the kernel's PATH_MAX, past
// which no call can open it whole. Resolving one component by component as the owner costs
// by the square of its length (a path of 60 000 components: 16 s of the worker's CPU).
const maxPathBytes = 4096

func pathTooLong(key, p string) error {
	if len(p) > maxPathBytes {
		return errcode.Msg(errcode.Validation, fmt.Sprintf("%s is %d bytes long, over the %d a path may hold", key, len(p), maxPathBytes))
	}
	return nil
}

func requireAbs(key string) func(ctx context.Context, c *Call) error {
	return func(_ context.Context, c *Call) error {
		p := c.Input.String(key)
		if p == "" {
			return nil
		}
		if strings.IndexByte(p, 0) >= 0 {
			return errcode.Msg(errcode.Validation, fmt.Sprintf("%s contains a NUL byte, which no path can hold", key))
		}
		if err := pathTooLong(key, p); err != nil {
			return err
		}
		if !filepath.IsAbs(p) && !strings.HasPrefix(p, "~") {
			return errcode.Msg(errcode.Validation, fmt.Sprintf("%s must be an absolute path, not %q; prefix it with the working directory %s", key, p, c.Session.Cwd()))
		}
		if key == "file_path" && len(p) > 1 && strings.HasSuffix(p, "/") {
			// The kernel refuses a file named with a trailing slash (EISDIR, ENOTDIR); the
			// cleaned path would read or write the name without it.
			return errcode.Msg(errcode.Validation, fmt.Sprintf("file_path %q ends in /: name a file, not a directory", p))
		}
		return nil
	}
}
