package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDefaultsValidate(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name    string
		body    string
		wantErr string
		check   func(Config) bool
	}{
		{"empty file keeps defaults", "", "", func(c Config) bool { return c.AdminGroup == "sandboxd-admin" }},
		{"override", "admin_group: wheel\nsandbox:\n  pids_max: 64\n", "", func(c Config) bool {
			return c.AdminGroup == "wheel" && c.Sandbox.PidsMax == 64 && c.Sandbox.MemoryMaxBytes == Default().Sandbox.MemoryMaxBytes
		}},
		{"unknown field", "admin_grup: wheel\n", "unknown field", nil},
		{"bad value", "max_parallel_calls: 0\n", "max_parallel_calls", nil},
		{"bad hook", "hooks:\n  PreToolUse:\n  - matcher: Bash\n    hooks:\n    - type: http\n      command: x\n", "hooks", nil},
		{"not yaml", "{{{", "config", nil},
		{"unsigned bundle refused", "bundle:\n  url: http://127.0.0.1:8181\n  resource: b.tar.gz\n", "signing_key_file", nil},
		{"unsigned bundle by choice", "bundle:\n  url: http://127.0.0.1:8181\n  resource: b.tar.gz\n  require_signature: false\n", "", func(c Config) bool {
			return c.Bundle.RequireSignature != nil && !*c.Bundle.RequireSignature
		}},
		{"bad cgroup name", "sandbox:\n  cgroup_name: ../x\n", "cgroup_name", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load(write(strings.ReplaceAll(tc.name, " ", "_")+".yaml", tc.body), true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(cfg) {
				t.Errorf("unexpected config %+v", cfg)
			}
		})
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), false); err != nil {
		t.Errorf("missing default file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), true); err == nil {
		t.Error("missing required file accepted")
	}
}
