package executor

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandboxd/sandboxd/sandbox"
)

const bashOutputSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["bash_id"],
  "properties": {
    "bash_id": {"type": "string", "description": "The ID of the background shell to read output from"},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset in stdout to read from; default: where the last read stopped"}
  }
}`

const killShellSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["shell_id"],
  "properties": {
    "shell_id": {"type": "string", "description": "The ID of the background shell to kill"}
  }
}`

// bashOutputChunk is the most one BashOutput returns of each stream.
const bashOutputChunk = 30_000

func bashOutputDef(h *Host) Def {
	return Def{
		Name:            "BashOutput",
		Description:     "Reads output of a background shell (run_in_background, or a command moved to the background at its timeout): the output since the last read, or from offset; with its status and exit code.",
		Schema:          bashOutputSchema,
		ReadOnly:        always,
		ConcurrencySafe: always,
		Defer:           true,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			t, err := h.task(c.Session, c.Input.String("bash_id"))
			if err != nil {
				return nil, err
			}
			t.mu.Lock()
			defer t.mu.Unlock()
			if c.Input.Has("offset") {
				t.offOut = c.Input.Int("offset", 0)
			}
			out, err := t.run.stdout.ReadAt(t.offOut, bashOutputChunk)
			if err != nil {
				return nil, err
			}
			errOut, err := t.run.stderr.ReadAt(t.offErr, bashOutputChunk/3)
			if err != nil {
				return nil, err
			}
			start := t.offOut
			t.offOut += int64(len(out))
			t.offErr += int64(len(errOut))
			st := t.status()
			var b strings.Builder
			fmt.Fprintf(&b, "<status>%s</status>\n", st["status"])
			if code, ok := st["exit_code"]; ok {
				fmt.Fprintf(&b, "<exit_code>%d</exit_code>\n", code)
			}
			if by, ok := st["killed_by"]; ok {
				fmt.Fprintf(&b, "<killed_by>%s</killed_by>\n", by)
			}
			if moved, ok := st["moved_aside"].([]string); ok {
				names := strings.Join(moved, ", ")
				if more, ok := st["moved_aside_more"].(int); ok && more > 0 {
					names += fmt.Sprintf(" and %d more", more)
				}
				fmt.Fprintf(&b, "[sandboxd moved aside what this command made at protected paths (each is now NAME%sCALL beside it): %s]\n",
					sandbox.BlockedSuffix, names)
			}
			if len(out) > 0 {
				fmt.Fprintf(&b, "<stdout>\n%s\n</stdout>\n", strings.TrimRight(toValidUTF8(string(out)), "\n"))
			}
			if len(errOut) > 0 {
				fmt.Fprintf(&b, "<stderr>\n%s\n</stderr>\n", strings.TrimRight(toValidUTF8(string(errOut)), "\n"))
			}
			totalOut := t.run.stdout.Total()
			kept := min(totalOut, MaxPersistedBytes)
			if t.offOut < kept {
				fmt.Fprintf(&b, "[more output: %s of stdout not read yet; call BashOutput again]\n", humanBytes(kept-t.offOut))
			} else if totalOut > MaxPersistedBytes {
				fmt.Fprintf(&b, "[stdout past the first %s was not kept (%s in total)]\n", humanBytes(MaxPersistedBytes), humanBytes(totalOut))
			}
			res := Text(strings.TrimRight(b.String(), "\n"))
			st["stdout"] = toValidUTF8(string(out))
			st["stderr"] = toValidUTF8(string(errOut))
			st["stdout_offset"] = start
			st["next_offset"] = t.offOut
			res.Data = st
			return res, nil
		},
	}
}

func killShellDef(h *Host) Def {
	return Def{
		Name:        "KillShell",
		Description: "Kills a running background shell by its ID.",
		Schema:      killShellSchema,
		Defer:       true,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			id := c.Input.String("shell_id")
			t, err := h.task(c.Session, id)
			if err != nil {
				return nil, err
			}
			if t.run.finished() {
				res := Text(fmt.Sprintf("Shell %s had already finished; nothing to kill.", id))
				res.Data = t.status()
				return res, nil
			}
			t.run.kill("killed")
			select {
			case <-t.run.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			res := Text(fmt.Sprintf("Successfully killed shell: %s (%s)", id, t.command))
			res.Data = t.status()
			return res, nil
		},
	}
}
