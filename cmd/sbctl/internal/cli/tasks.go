package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

// cmdTask manages a session's background Bash tasks (started with `sbctl bash --background`).
func cmdTask(e *Env, args []string) error {
	sub, _, err := subcommand(e, args, "usage: sbctl task ls --session ID | output --session ID TASK [--offset N] | kill --session ID TASK [--wait D] [--mode M]")
	if err != nil {
		return err
	}
	fs := NewFlags(e, "task "+sub)
	sessionID := fs.String("session", "", "session id (required)")
	offset := fs.Int("offset", -1, "output: read from this byte offset instead of what is new")
	// KillShell is not read-only: default mode asks before it, like any call that changes
	// something, so kill takes the tool commands' answers to an ask.
	tc := &toolCall{}
	fs.StringVar(&tc.sf.mode, "mode", "", "output, kill: mode of this call (default: the session's)")
	tc.waitFlag(fs)
	rest, err := ParseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if *sessionID == "" {
		return UsageError("task: --session is required (background tasks live in a session)")
	}
	c := e.Client()
	switch sub {
	case "ls":
		var tl protocol.TaskList
		if err := c.Do(e.Ctx, client.MethodGet, "/v1/sessions/"+*sessionID+"/tasks", nil, &tl); err != nil {
			return err
		}
		if e.JSON {
			return PrintJSON(e.Stdout, tl)
		}
		tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSTATUS\tEXIT\tCOMMAND")
		for _, t := range tl.Tasks {
			exit := "-"
			if v, ok := t["exit_code"]; ok {
				exit = fmt.Sprint(v)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", Visible(fmt.Sprint(t["id"])), Visible(fmt.Sprint(t["status"])), exit, Visible(fmt.Sprint(t["command"])))
		}
		return tw.Flush()
	case "output", "kill":
		if len(rest) != 1 {
			return UsageError(fmt.Sprintf("usage: sbctl task %s --session ID TASK", sub))
		}
		tool, in := "KillShell", map[string]any{"shell_id": rest[0]}
		if sub == "output" {
			tool, in = "BashOutput", map[string]any{"bash_id": rest[0]}
			if *offset >= 0 {
				in["offset"] = *offset
			}
		}
		raw, _ := json.Marshal(in)
		tc.session = *sessionID
		return callTool(e, tc, "calls", tool, raw)
	default:
		return UsageError(fmt.Sprintf("unknown task subcommand %q: want ls, output, kill", sub))
	}
}
