package executor

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/worker"
)

const globSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["pattern"],
  "properties": {
    "pattern": {"type": "string", "description": "The glob pattern to match files against"},
    "path": {"type": "string", "description": "The directory to search in. If not specified, the current working directory will be used. Omit it for the default; do not pass \"undefined\" or \"null\"."}
  }
}`

// globLimit is how many paths Glob returns (COMPAT: max 100).
const globLimit = 100

func globDef(h *Host) Def {
	return Def{
		Name: "Glob",
		Description: "Fast file pattern matching for any codebase size. Supports patterns like \"**/*.js\" or \"src/**/*.{ts,tsx}\". " +
			"Returns matching file paths sorted by modification time, newest first, at most 100. VCS directories (.git and the like) are skipped.",
		Schema:           globSchema,
		ReadOnly:         always,
		ConcurrencySafe:  always,
		Validate:         requireAbs("path"),
		Backfill:         backfillPath("path", true),
		CheckPermissions: pathFacts(h, "path", permission.Read),
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			start := time.Now()
			root := c.Input.String("path")
			if root == "" {
				root = c.Session.Cwd()
			}
			root = expandPath(c, root)
			var r *worker.GlobReply
			err := h.withWorker(ctx, c.Session, func(w *worker.Client) error {
				var err error
				r, err = w.Glob(ctx, worker.GlobArgs{Pattern: c.Input.String("pattern"), Root: root, Limit: globLimit})
				return err
			})
			if err != nil {
				return nil, err
			}
			text := "No files found"
			if len(r.Paths) > 0 {
				text = strings.Join(r.Paths, "\n")
			}
			if r.Truncated {
				text += fmt.Sprintf("\n(Results are truncated: showing the %d newest of %d matches. Use a more specific path or pattern.)", len(r.Paths), r.Total)
			}
			res := Text(text)
			res.Data = map[string]any{"filenames": r.Paths, "numFiles": len(r.Paths), "truncated": r.Truncated, "durationMs": time.Since(start).Milliseconds()}
			return res, nil
		},
	}
}
