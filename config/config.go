// Package config is the daemon's configuration: one immutable value, loaded from YAML with
// unknown fields rejected, safe defaults, and a list of small named checks.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// Default paths of DESIGN.md.
const (
	DefaultSocket    = "/run/sandboxd/sandboxd.sock"
	DefaultStateDir  = "/var/lib/sandboxd"
	DefaultConfig    = "/etc/sandboxd/sandboxd.yaml"
	DefaultPolicyDir = "/etc/sandboxd/policy.d"
)

// Config is the daemon's configuration. Defaults are the safe choice; a true bool means less safe.
type Config struct {
	// AdminGroup's members (and root) see every session and the whole audit log.
	AdminGroup string `json:"admin_group"`
	// PolicyDir holds admin settings (*.json) and custom Rego (*.rego).
	PolicyDir string `json:"policy_dir"`
	// MaxRequestBytes bounds a request body.
	MaxRequestBytes int64 `json:"max_request_bytes"`
	// ReadHeaderTimeoutSec and ReadBodyTimeoutSec cut off clients that stall mid-request.
	ReadHeaderTimeoutSec int `json:"read_header_timeout_sec"`
	ReadBodyTimeoutSec   int `json:"read_body_timeout_sec"`
	// IdleTimeoutSec closes idle keep-alive connections.
	IdleTimeoutSec int `json:"idle_timeout_sec"`
	// DrainTimeoutSec is how long SIGTERM waits for in-flight calls before killing them.
	DrainTimeoutSec int `json:"drain_timeout_sec"`
	// MaxParallelCalls bounds the concurrency-safe calls of one batch run at once.
	MaxParallelCalls int `json:"max_parallel_calls"`
	// MaxSessionsPerUser bounds the live sessions one uid may hold.
	MaxSessionsPerUser int `json:"max_sessions_per_user"`
	// SessionBudgetChars is the per-session aggregate result budget.
	SessionBudgetChars int64 `json:"session_budget_chars"`
	// ReadStateBytes bounds each session's read-file state.
	ReadStateBytes int64 `json:"read_state_bytes"`
	// ReadClaudeSettings also reads permissions from .claude/settings(.local).json.
	ReadClaudeSettings bool `json:"read_claude_settings"`
	// Sandbox are the confinement settings of every execution.
	Sandbox Sandbox `json:"sandbox"`
	// Audit configures the audit log.
	Audit Audit `json:"audit"`
	// Hooks are admin-configured hooks, run as the caller inside the sandbox.
	Hooks Hooks `json:"hooks"`
	// Bundle, when its URL is set, pulls policy as an OPA bundle.
	Bundle Bundle `json:"bundle"`
}

// Sandbox configures confinement.
type Sandbox struct {
	// CgroupName is the daemon's cgroup subtree under each hierarchy. One daemon per name per
	// host: at start the daemon kills whatever a crashed predecessor left under it.
	CgroupName       string `json:"cgroup_name"`
	MemoryMaxBytes   int64  `json:"memory_max_bytes"`
	PidsMax          int64  `json:"pids_max"`
	CPUQuotaMilli    int64  `json:"cpu_quota_milli"`
	FileSizeMaxBytes int64  `json:"file_size_max_bytes"`
	OpenFilesMax     int64  `json:"open_files_max"`
	TmpSizeBytes     int64  `json:"tmp_size_bytes"`
	// ExtraSyscalls extend the seccomp allowlist.
	ExtraSyscalls []string `json:"extra_syscalls"`
	// DenyPaths are hidden from every child; "~/" is the session owner's home.
	DenyPaths []string `json:"deny_paths"`
	// CacheDirs are made writable in every child ("~/" = owner's home), e.g. ~/.cache/go-build.
	CacheDirs []string `json:"cache_dirs"`
	// AllowNetwork gives children the host network instead of loopback only.
	AllowNetwork bool `json:"allow_network"`
}

// Audit configures the audit log.
type Audit struct {
	MaxFileBytes       int64  `json:"max_file_bytes"`
	MaxFileAgeSec      int    `json:"max_file_age_sec"`
	RetainFiles        int    `json:"retain_files"`
	CheckpointEvery    int    `json:"checkpoint_every"`
	CheckpointInterval int    `json:"checkpoint_interval_sec"`
	Syslog             string `json:"syslog"`
}

// Hooks are command hooks keyed by event, in the agents' settings shape.
type Hooks struct {
	PreToolUse  []HookMatcher `json:"PreToolUse"`
	PostToolUse []HookMatcher `json:"PostToolUse"`
}

// HookMatcher selects tools by name pattern and lists the hooks to run.
type HookMatcher struct {
	Matcher string `json:"matcher"`
	Hooks   []Hook `json:"hooks"`
}

// Hook is one command hook.
type Hook struct {
	Type       string `json:"type"`
	Command    string `json:"command"`
	TimeoutSec int    `json:"timeout"`
}

// Bundle configures OPA bundle pulls, in the shape of OPA's own services/bundles/keys.
type Bundle struct {
	// URL is the bundle service base URL; empty turns bundles off.
	URL      string `json:"url"`
	Resource string `json:"resource"`
	Name     string `json:"name"`
	// PollMinSec and PollMaxSec bound the random polling interval.
	PollMinSec int `json:"poll_min_sec"`
	PollMaxSec int `json:"poll_max_sec"`
	// BearerTokenFile holds the service's bearer token (read at load; root-only).
	BearerTokenFile string `json:"bearer_token_file"`
	// SigningKeyFile is the PEM public key that signs bundles; SigningAlgorithm e.g. RS256.
	SigningKeyFile   string `json:"signing_key_file"`
	SigningKeyID     string `json:"signing_key_id"`
	SigningAlgorithm string `json:"signing_algorithm"`
	SigningScope     string `json:"signing_scope"`
	// RequireSignature refuses unsigned bundles (the safe default).
	RequireSignature *bool `json:"require_signature"`
	// FullPolicy lets the bundle replace the embedded policy instead of adding custom rules.
	FullPolicy bool `json:"full_policy"`
	// DecisionLogs uploads every decision to the service's /logs.
	DecisionLogs bool `json:"decision_logs"`
}

// Default returns the embedded defaults.
func Default() Config {
	return Config{
		AdminGroup:           "sandboxd-admin",
		PolicyDir:            DefaultPolicyDir,
		MaxRequestBytes:      1 << 20,
		ReadHeaderTimeoutSec: 10,
		ReadBodyTimeoutSec:   30,
		IdleTimeoutSec:       120,
		DrainTimeoutSec:      30,
		MaxParallelCalls:     8,
		MaxSessionsPerUser:   64,
		SessionBudgetChars:   400_000,
		ReadStateBytes:       1 << 20,
		Sandbox: Sandbox{
			CgroupName:       "sandboxd",
			MemoryMaxBytes:   2 << 30,
			PidsMax:          512,
			CPUQuotaMilli:    2000,
			FileSizeMaxBytes: 1 << 30,
			OpenFilesMax:     4096,
			TmpSizeBytes:     512 << 20,
			DenyPaths: []string{"~/.ssh", "~/.aws", "~/.gnupg", "~/.config/gcloud", "~/.azure",
				"~/.kube", "~/.docker/config.json", "~/.netrc", "/var/run/docker.sock", "/run/docker.sock"},
		},
		Audit: Audit{
			MaxFileBytes:       64 << 20,
			MaxFileAgeSec:      86400,
			RetainFiles:        30,
			CheckpointEvery:    1000,
			CheckpointInterval: 60,
		},
	}
}

// Load reads path over the defaults. A missing file at the default path is not an error
// (the embedded defaults serve); a missing file that was asked for by flag is.
func Load(path string, required bool) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !required {
		return cfg, cfg.Validate()
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	if err := Parse(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, cfg.Validate()
}

// Parse decodes YAML (or JSON) into cfg, rejecting unknown fields.
func Parse(data []byte, cfg *Config) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(cfg)
}

// Validate runs the named checks and joins every failure.
func (c Config) Validate() error {
	checks := []struct {
		name string
		ok   bool
	}{
		{"admin_group must not be empty", c.AdminGroup != ""},
		{"policy_dir must be absolute", filepath.IsAbs(c.PolicyDir)},
		{"max_request_bytes must be between 1 KiB and 64 MiB", c.MaxRequestBytes >= 1<<10 && c.MaxRequestBytes <= 64<<20},
		{"read_header_timeout_sec must be > 0", c.ReadHeaderTimeoutSec > 0},
		{"read_body_timeout_sec must be > 0", c.ReadBodyTimeoutSec > 0},
		{"idle_timeout_sec must be > 0", c.IdleTimeoutSec > 0},
		{"drain_timeout_sec must be >= 0", c.DrainTimeoutSec >= 0},
		{"max_parallel_calls must be between 1 and 256", c.MaxParallelCalls >= 1 && c.MaxParallelCalls <= 256},
		{"max_sessions_per_user must be > 0", c.MaxSessionsPerUser > 0},
		{"session_budget_chars must be > 0", c.SessionBudgetChars > 0},
		{"read_state_bytes must be > 0", c.ReadStateBytes > 0},
		{"sandbox.cgroup_name must be a plain name of letters, digits, '-', '_' or '.'", validName(c.Sandbox.CgroupName)},
		{"sandbox.memory_max_bytes must be >= 16 MiB", c.Sandbox.MemoryMaxBytes >= 16<<20},
		{"sandbox.pids_max must be >= 8", c.Sandbox.PidsMax >= 8},
		{"sandbox.cpu_quota_milli must be >= 10", c.Sandbox.CPUQuotaMilli >= 10},
		{"sandbox.file_size_max_bytes must be > 0", c.Sandbox.FileSizeMaxBytes > 0},
		{"sandbox.open_files_max must be >= 64", c.Sandbox.OpenFilesMax >= 64},
		{"sandbox.tmp_size_bytes must be >= 1 MiB", c.Sandbox.TmpSizeBytes >= 1<<20},
		{"audit.max_file_bytes must be >= 64 KiB", c.Audit.MaxFileBytes >= 64<<10},
		{"audit.retain_files must be >= 1", c.Audit.RetainFiles >= 1},
		{"hooks must be command hooks with a command", hooksValid(c.Hooks)},
		{"bundle.url needs bundle.resource", c.Bundle.URL == "" || c.Bundle.Resource != ""},
		{"bundle: signatures are required unless require_signature: false; give signing_key_file", c.Bundle.URL == "" || c.Bundle.SigningKeyFile != "" || (c.Bundle.RequireSignature != nil && !*c.Bundle.RequireSignature)},
	}
	var errs []error
	for _, ck := range checks {
		if !ck.ok {
			errs = append(errs, errors.New(ck.name))
		}
	}
	return errors.Join(errs...)
}

func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func hooksValid(h Hooks) bool {
	for _, ms := range [][]HookMatcher{h.PreToolUse, h.PostToolUse} {
		for _, m := range ms {
			for _, hk := range m.Hooks {
				if (hk.Type != "" && hk.Type != "command") || hk.Command == "" || hk.TimeoutSec < 0 {
					return false
				}
			}
		}
	}
	return true
}

// Duration converts a seconds field.
func Duration(sec int) time.Duration { return time.Duration(sec) * time.Second }
