package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"go.uber.org/zap"
)

// Decision logs carry every call's input: https:// only, unless allowed insecure (issue 17).
func TestDecisionLogsNeedHTTPS(t *testing.T) {
	cases := []struct {
		name    string
		cfg     BundleConfig
		wantErr string
	}{
		{"https with logs", BundleConfig{ServiceURL: "https://opa.example", Resource: "b.tar.gz", DecisionLogs: true}, ""},
		{"http without logs", BundleConfig{ServiceURL: "http://opa.example", Resource: "b.tar.gz"}, ""},
		{"http with logs refused", BundleConfig{ServiceURL: "http://opa.example", Resource: "b.tar.gz", DecisionLogs: true}, "https://"},
		{"http with logs allowed", BundleConfig{ServiceURL: "http://opa.example", Resource: "b.tar.gz", DecisionLogs: true, AllowInsecureDecisionLogs: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.validate()
			if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("validate = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// Decision log inputs are redacted and bounded like the audit log's.
func TestDecisionLogInputRedacted(t *testing.T) {
	st := &bundleState{cfg: BundleConfig{DecisionLogs: true}, log: zap.NewNop()}
	in := ast.MustInterfaceToValue(map[string]any{
		"command": "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwx' https://x",
		"content": strings.Repeat("y", 200<<10),
	})
	st.logDecision(context.Background(), "sha256:x", in, ast.BooleanTerm(true))
	if len(st.events) != 1 {
		t.Fatalf("%d events", len(st.events))
	}
	got := string(st.events[0].Input)
	if strings.Contains(got, "abcdefghijklmnop") {
		t.Errorf("secret reached the decision log: %.200s", got)
	}
	if len(got) > decisionLogInputMaxBytes || !strings.Contains(got, `"truncated":true`) {
		t.Errorf("input not bounded: %d bytes", len(got))
	}
}
