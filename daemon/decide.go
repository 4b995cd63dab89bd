package daemon

import (
	"context"

	"github.com/sandboxd/sandboxd/executor"
	"github.com/sandboxd/sandboxd/permission"
)

// modeDecider decides by mode alone: read-only calls are allowed, the rest follow the mode.
type modeDecider struct{}

func (modeDecider) Decide(_ context.Context, in *executor.DecisionInput) (permission.Decision, error) {
	if in.ReadOnly {
		return permission.Decision{Behavior: permission.Allow, Reason: "read-only call", Source: "mode", Step: "mode"}, nil
	}
	switch in.Call.Mode {
	case permission.ModeBypassPermissions:
		return permission.Decision{Behavior: permission.Allow, Reason: "bypassPermissions mode", Source: "mode", Step: "mode"}, nil
	case permission.ModePlan:
		return permission.Decision{Behavior: permission.Deny, Reason: "plan mode is read-only", Source: "mode", Step: "mode"}, nil
	}
	return permission.Decision{Behavior: permission.Ask, Reason: "not read-only", Source: "mode", Step: "mode", Route: "user"}, nil
}
