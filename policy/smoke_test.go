package policy

import (
	"context"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

func TestSmoke(t *testing.T) {
	e := newEngine(t, Config{})
	rs := ruleSet(t, permission.SourceProject, []string{"Bash(git *)"}, []string{"Bash(rm *)"}, nil)
	f := &permission.Facts{Tool: "Bash", Input: map[string]any{"command": "git push"}, Mode: permission.ModeDefault, Cwd: "/w", Home: "/home/u",
		ToolFacts: permission.ToolFacts{Bash: bash(sub(false, "git", "push"))}}
	d, err := e.Decide(context.Background(), f, rs)
	t.Logf("%+v %v", d, err)
}
