package executor

import (
	"context"
	"fmt"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
)

const exitPlanModeSchema = `{
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "plan": {"type": "string", "description": "The plan to present for approval (Markdown)"}
  }
}`

func enterPlanModeDef(h *Host) Def {
	return Def{
		Name: "EnterPlanMode",
		Description: "Switches the session to plan mode: only read-only tools run, every write is denied, so the task can be explored and a plan " +
			"written before anything changes. Leave it with ExitPlanMode, which asks for approval of the plan.",
		// Entering plan mode only takes rights away, so it needs no question.
		ReadOnly: always,
		Defer:    true,
		Run: func(_ context.Context, c *Call, _ Progress) (*Result, error) {
			cur := c.Session.Mode()
			if cur == permission.ModePlan {
				return Text("The session is already in plan mode."), nil
			}
			plan := permission.ModePlan
			res := Text("Entered plan mode. Explore with read-only tools (Read, Glob, Grep, read-only Bash), then present the plan with ExitPlanMode; nothing can be changed until it is approved.")
			res.ContextChange = &ContextChange{Mode: &plan, PlanFrom: &cur}
			res.Data = map[string]any{"mode": plan, "previous_mode": cur}
			return res, nil
		},
	}
}

// exitPlanModeDef is not read-only, so the policy asks: leaving plan mode is the approval of
// the plan.
func exitPlanModeDef(h *Host) Def {
	return Def{
		Name:        "ExitPlanMode",
		Description: "Presents the plan for approval and, once approved, leaves plan mode (back to the mode before it) so the plan can be carried out.",
		Schema:      exitPlanModeSchema,
		Defer:       true,
		Run: func(_ context.Context, c *Call, _ Progress) (*Result, error) {
			if c.Session.Mode() != permission.ModePlan {
				return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("the session is not in plan mode (it is in %s); there is nothing to exit", c.Session.Mode()))
			}
			// The mode EnterPlanMode left, as long as nothing else has changed the mode since:
			// an owner who narrowed the session and then put it in plan did not choose the
			// mode the agent entered plan mode from.
			next := c.Session.PrePlan()
			if next == permission.ModePlan || next == "" {
				// Created in plan mode, or put in it by its owner: only the owner loosens it.
				return nil, errcode.Msg(errcode.Validation, "the session was put in plan mode by its owner, not by EnterPlanMode; its owner changes the mode (sbctl session mode), not a tool call")
			}
			res := Text(fmt.Sprintf("The plan was approved; plan mode is over and the session is back in %s mode. Carry out the plan.", next))
			res.ContextChange = &ContextChange{Mode: &next}
			res.Data = map[string]any{"mode": next, "plan": c.Input.String("plan")}
			return res, nil
		},
	}
}
