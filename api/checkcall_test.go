package api

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/protocol"
)

// A call's tool name and tool_use_id go whole into its audit records, where only the input is
// capped: each is bounded like a report's, whatever the request body may hold.
func TestCheckCallBoundsAuditedNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 257) // a report's bound, 256, and one more
	cases := []struct {
		name string
		cr   protocol.CallRequest
		ok   bool
	}{
		{"short", protocol.CallRequest{Tool: "mcp__srv__tool", ToolUseID: "toolu_01"}, true},
		{"longest", protocol.CallRequest{Tool: long[1:], ToolUseID: long[1:]}, true},
		{"long tool", protocol.CallRequest{Tool: long}, false},
		{"long tool_use_id", protocol.CallRequest{Tool: "Read", ToolUseID: long}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, decideOnly := range []bool{false, true} {
				err := checkCall(tc.cr, decideOnly)
				if tc.ok != (err == nil) || err != nil && errcode.Of(err) != errcode.Validation {
					t.Errorf("decide only %v: %v", decideOnly, err)
				}
			}
		})
	}
}
