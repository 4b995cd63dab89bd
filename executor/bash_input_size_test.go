package executor

import (
	"context"
	"strings"
	"testing"
)

// TestBashInputTooLargeNamesTheField: a Bash input the audit log would not keep whole is
// refused naming the field that is large and its size, not the command when the command is
// small: the agent must know what to shorten.
func TestBashInputTooLargeNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		max      int
		in       Input
		want     []string
		wantNone string
	}{
		{"large description", 256 << 10, Input{"command": "echo visible-cmd", "description": strings.Repeat("x", 300<<10)},
			[]string{"description is 307200 bytes", "command 16 bytes", "shorten description", "262144 bytes"}, "command is"},
		{"large command", 64 << 10, Input{"command": "echo " + strings.Repeat("x", 100<<10), "description": "print"},
			[]string{"command is 102405 bytes", "description 5 bytes", "Write tool"}, "shorten"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := bashDef(&Host{AuditInputBytes: tc.max}).Validate(context.Background(), &Call{Input: tc.in})
			if err == nil {
				t.Fatal("an input the audit log would cut was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), tc.wantNone) {
				t.Errorf("%v\nsays %q", err, tc.wantNone)
			}
		})
	}
	if err := bashDef(&Host{AuditInputBytes: 256 << 10}).Validate(context.Background(), &Call{Input: Input{"command": "echo small", "description": "print"}}); err != nil {
		t.Errorf("a small input refused: %v", err)
	}
}
