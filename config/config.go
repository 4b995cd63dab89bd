// Package config is the daemon's configuration: one immutable value, loaded from YAML with
// unknown fields rejected, safe defaults, and a list of small named checks.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	seccomp "github.com/seccomp/libseccomp-golang"
	"sigs.k8s.io/yaml"

	"github.com/sandboxd/sandboxd/internal/regfile"
	"github.com/sandboxd/sandboxd/permission"
)

// Default paths of DESIGN.md.
const (
	DefaultSocket    = "/run/sandboxd/sandboxd.sock"
	DefaultStateDir  = "/var/lib/sandboxd"
	DefaultConfig    = "/etc/sandboxd/sandboxd.yaml"
	DefaultPolicyDir = "/etc/sandboxd/policy.d"
)

// MaxDrainTimeoutSec bounds drain_timeout_sec: systemd SIGKILLs the daemon TimeoutStopSec
// (45 s in systemd/sandboxd.service) after SIGTERM, and after the drain the stop still kills
// what is left, removes the cgroups and closes the audit log with its stop record, for which
// it keeps stopAfterDrainSec. Killed mid-drain, the log shows no clean stop and calls are
// left to the next start. A change to either must follow the unit (a test reads it).
const (
	MaxDrainTimeoutSec = 35
	stopAfterDrainSec  = 10
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
	// Limits bound what one user may take of the shared daemon (issue 17).
	Limits Limits `json:"limits"`
	// Sessions configures session lifetime.
	Sessions Sessions `json:"sessions"`
	// Approvals configures the queue of asks waiting for a person.
	Approvals Approvals `json:"approvals"`
	// Auto configures auto mode's second stage, the external classifier.
	Auto Auto `json:"auto"`
	// Network is the sessions' egress.
	Network Network `json:"network"`
	// Metrics configures the optional Prometheus listener (off by default).
	Metrics Metrics `json:"metrics"`
}

// Network modes of a session: none (loopback only), proxy (only through the daemon's
// filtering proxy), host (the host's network).
const (
	NetworkNone  = "none"
	NetworkProxy = "proxy"
	NetworkHost  = "host"
)

// Network configures the sessions' egress.
type Network struct {
	// Mode is a new session's network when it names none. sandbox.allow_network: true, the
	// older switch, makes it host (and lets everyone choose host).
	Mode string `json:"mode"`
	// AllowedDomains and DeniedDomains decide proxied connections beside the WebFetch(domain:…)
	// rules of every source; a deny anywhere wins. Same syntax as the rules' domain part, and
	// normalized as it is (permission.DomainPattern) when loaded: an entry that is not a
	// domain pattern is refused, since it would match nothing, and a deny would fail open.
	AllowedDomains []string `json:"allowed_domains"`
	DeniedDomains  []string `json:"denied_domains"`
	// AllowPrivateCIDRs are private, loopback, link-local or other special-purpose ranges, and
	// addresses of the daemon's host, that the proxy may still reach (a registry on the LAN);
	// everything else there is refused whatever a name resolves to.
	AllowPrivateCIDRs []string `json:"allow_private_cidrs"`
	// HostUsers may choose the host's network for their sessions (user names or uids); root
	// always may.
	HostUsers []string `json:"host_users"`
	// ProxyPort is where the proxy listens on each proxied session's loopback.
	ProxyPort int `json:"proxy_port"`
	// WebFetchPlainHTTP makes the WebFetch tool fetch http:// URLs as given instead of upgrading
	// them to https:// (a LAN server without TLS); the policy decides either way.
	WebFetchPlainHTTP bool `json:"webfetch_plain_http"`
	// TLSIntercept makes the proxy terminate the sessions' TLS with certificates of a CA the
	// daemon keeps in its state directory (and tells proxied sessions to trust), so
	// WebFetch(METHOD host/path) rules apply to HTTPS too. Read at start.
	TLSIntercept bool `json:"tls_intercept"`
	// AllowEncryptedClientHello lets a tunnel's TLS offer to encrypt its server name (Chrome
	// does on every connection, with a GREASE offer no proxy can tell from a real one). The
	// visible name must still be the tunnel's host; a real offer then hides which customer of
	// a shared front it reaches. Read at start.
	AllowEncryptedClientHello bool `json:"allow_encrypted_client_hello"`
}

// EffectiveNetworkMode is network.mode, or host when sandbox.allow_network asks for it.
func (c Config) EffectiveNetworkMode() string {
	if c.Sandbox.AllowNetwork && c.Network.Mode == NetworkNone {
		return NetworkHost
	}
	return c.Network.Mode
}

// Approvals configures pending approvals.
type Approvals struct {
	// TimeoutSec is how long an approval waits for an answer; then it expires as a deny. It
	// also bounds how long a call may wait (wait_ms).
	TimeoutSec int `json:"timeout_sec"`
}

// Auto configures auto mode.
type Auto struct {
	Classifier AutoClassifier `json:"classifier"`
}

// AutoClassifier is auto mode's optional second stage, for the calls the daemon's own risk
// rules find ambiguous: a command (run as the session owner, confined like hooks) or an
// HTTP endpoint, given the call and the session's last calls as JSON, answering allow, deny
// or ask. None configured, an error or a timeout: ask a person.
type AutoClassifier struct {
	Command string `json:"command"`
	URL     string `json:"url"`
	// TimeoutSec bounds one verdict.
	TimeoutSec int `json:"timeout_sec"`
	// History is how many of the session's last calls the request carries.
	History int `json:"history"`
}

// Limits bound one request and one user, so no user can starve or erase another. Zero means
// the default, never "unlimited": every limit has a safe default.
type Limits struct {
	// ResponseBytes bounds the result bytes of one response (a whole batch included), shared
	// by one user's responses in flight; past it text results are persisted with a preview and
	// images are left out with a note.
	ResponseBytes int64 `json:"response_bytes"`
	// BatchCalls bounds the calls of one batch request (over it: 400).
	BatchCalls int `json:"batch_calls"`
	// ConnectionsPerUser bounds one uid's open connections to the socket.
	ConnectionsPerUser int `json:"connections_per_user"`
	// CallsPerUser bounds one uid's calls running at once (over it: 429 too_many_calls).
	CallsPerUser int `json:"calls_per_user"`
	// SessionsPerUser bounds one uid's live sessions; 0 takes max_sessions_per_user.
	SessionsPerUser int `json:"sessions_per_user"`
	// PersistedBytesPerUser bounds one uid's persisted results; past it the oldest go first.
	PersistedBytesPerUser int64 `json:"persisted_bytes_per_user"`
	// TasksPerUser bounds one uid's running background tasks.
	TasksPerUser int `json:"tasks_per_user"`
	// TaskMaxSeconds is the longest a background task may run before it is killed.
	TaskMaxSeconds int `json:"task_max_seconds"`
	// RequestsPerSecondPerUser is one uid's sustained rate on every request but the health
	// check (token bucket; burst RequestsBurstPerUser). Over it: 429 rate_limited.
	RequestsPerSecondPerUser float64 `json:"requests_per_second_per_user"`
	RequestsBurstPerUser     int     `json:"requests_burst_per_user"`
	// EgressRequestsPerSecondPerUser paces one uid's proxied requests and tunnels over all its
	// sessions (burst EgressRequestsBurstPerUser): each is decided and audited, so this bounds
	// how fast one user's programs can grow the audit log. Over it a request waits its turn,
	// and is refused (429) if that would take more than 5 s.
	EgressRequestsPerSecondPerUser float64 `json:"egress_requests_per_second_per_user"`
	EgressRequestsBurstPerUser     int     `json:"egress_requests_burst_per_user"`
	// WriteTimeoutSec cuts off a client that does not read a response (each write must
	// complete within it), so a slow reader cannot hold a call's resources forever.
	WriteTimeoutSec int `json:"write_timeout_sec"`
	// RulesPerSession bounds the rules a session's owner controls (its request's, its parents',
	// its project's and its user's settings files): each is checked on every call.
	RulesPerSession int `json:"rules_per_session"`
	// DirsPerSession bounds a session's additional directories: each is mounted in every call.
	DirsPerSession int `json:"dirs_per_session"`
	// UserMemoryBytes and UserPids bound all of one uid's calls and workers together (the
	// cgroup <subtree>/user-<uid>); 0: half the host's memory, and 4096. Read at start only.
	UserMemoryBytes int64 `json:"user_memory_bytes"`
	UserPids        int64 `json:"user_pids"`
}

// Sessions configures session lifetime.
type Sessions struct {
	// IdleTimeoutSec ends a session (its tasks, worker and results) after this long without a request.
	IdleTimeoutSec int `json:"idle_timeout_sec"`
}

// EffectiveSessionsPerUser is limits.sessions_per_user, or max_sessions_per_user (the older
// name, kept for existing configs) when it is not set.
func (c Config) EffectiveSessionsPerUser() int {
	if c.Limits.SessionsPerUser > 0 {
		return c.Limits.SessionsPerUser
	}
	return c.MaxSessionsPerUser
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
	// ExtraSyscalls extend the seccomp allowlist, by the kernel's names ("vhangup"). Each must
	// be a name libseccomp knows; the daemon logs the ones that loosen the filter at start.
	ExtraSyscalls []string `json:"extra_syscalls"`
	// DenyPaths are hidden from every child; "~/" is the session owner's home.
	DenyPaths []string `json:"deny_paths"`
	// CacheDirs are made writable in every child ("~/" = owner's home), e.g. ~/.npm: a call writes
	// what the user's tools outside read there, so only caches that check their entries.
	CacheDirs []string `json:"cache_dirs"`
	// PathAppend are directories put after the default PATH of every child, so the tools
	// installed there (/usr/local/go/bin) run by name. Each, and every directory above it, must
	// be one only root can change: a program a call finds by name runs as what the policy
	// decided that name to be.
	PathAppend []string `json:"path_append"`
	// AllowNetwork gives children the host network instead of loopback only.
	AllowNetwork bool `json:"allow_network"`
	// AllowUnixSockets lets children create AF_UNIX sockets, and so connect to any pathname
	// socket the session's owner may reach (refused by default: see sandbox.Spec).
	AllowUnixSockets bool `json:"allow_unix_sockets"`
}

// Audit configures the audit log.
type Audit struct {
	MaxFileBytes       int64  `json:"max_file_bytes"`
	MaxFileAgeSec      int    `json:"max_file_age_sec"`
	RetainFiles        int    `json:"retain_files"`
	CheckpointEvery    int    `json:"checkpoint_every"`
	CheckpointInterval int    `json:"checkpoint_interval_sec"`
	Syslog             string `json:"syslog"`
	// SyslogFormat is what each syslog message carries after its RFC 5424 header: "record"
	// (the record line as stored, hash intact) or "ocsf" (the record as an OCSF event).
	SyslogFormat string `json:"syslog_format"`
	// MaxInputBytes bounds the input one record keeps; a larger input is stored as
	// {"truncated":true,"bytes":N,"preview":"..."} beside the digest of the whole.
	MaxInputBytes int `json:"max_input_bytes"`
	// RetainDays: retention never deletes a file holding a record younger than this, whatever
	// retain_files says.
	RetainDays int `json:"retain_days"`
	// MinFreeBytes: below this much free space on the audit volume new calls are refused
	// (503 audit_unavailable) instead of deleting anyone's history.
	MinFreeBytes int64 `json:"min_free_bytes"`
	// MaxBytesPerUserHour bounds the bytes one user's records of new work add to the log in an
	// hour (0: no bound): past it that user's new calls are refused (429), not everyone's.
	MaxBytesPerUserHour int64 `json:"max_bytes_per_user_hour"`
}

// Hooks are command hooks keyed by event, in the agents' settings shape.
type Hooks struct {
	PreToolUse  []HookMatcher `json:"PreToolUse"`
	PostToolUse []HookMatcher `json:"PostToolUse"`
	// PermissionRequest hooks see each new pending approval and may answer it (allow or
	// deny); one that fails or says nothing leaves it for a person.
	PermissionRequest []HookMatcher `json:"PermissionRequest"`
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
	// AllowInsecureDecisionLogs lets decision logs go to an http:// service (they hold
	// redacted inputs; https:// only by default).
	AllowInsecureDecisionLogs bool `json:"allow_insecure_decision_logs"`
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
				"~/.kube", "~/.docker/config.json", "~/.netrc", "/var/run/docker.sock", "/run/docker.sock",
				// Tokens and passwords the usual tools keep in the home, and browser profiles
				// (cookies, saved logins).
				"~/.git-credentials", "~/.config/gh/hosts.yml", "~/.password-store", "~/.pgpass", "~/.pypirc",
				"~/.cargo/credentials.toml", "~/.vault-token", "~/.mozilla", "~/.config/google-chrome", "~/.config/chromium"},
		},
		Audit: Audit{
			MaxFileBytes:       64 << 20,
			MaxFileAgeSec:      86400,
			RetainFiles:        30,
			CheckpointEvery:    1000,
			CheckpointInterval: 60,
			MaxInputBytes:      256 << 10,
			RetainDays:         90,
			MinFreeBytes:       256 << 20,
			// About 1 000 of the largest calls (64 KiB inputs) an hour; an agent's usual
			// load is a few MB.
			MaxBytesPerUserHour: 256 << 20,
		},
		Limits: Limits{
			ResponseBytes:                  64 << 20,
			BatchCalls:                     64,
			ConnectionsPerUser:             32,
			CallsPerUser:                   16,
			PersistedBytesPerUser:          1 << 30,
			TasksPerUser:                   32,
			TaskMaxSeconds:                 3600,
			RequestsPerSecondPerUser:       50,
			RequestsBurstPerUser:           100,
			EgressRequestsPerSecondPerUser: 1000,
			EgressRequestsBurstPerUser:     5000,
			WriteTimeoutSec:                60,
			RulesPerSession:                1024,
			DirsPerSession:                 64,
		},
		Sessions:  Sessions{IdleTimeoutSec: 86400},
		Approvals: Approvals{TimeoutSec: 300},
		Auto:      Auto{Classifier: AutoClassifier{TimeoutSec: 10, History: 10}},
		Network:   Network{Mode: NetworkNone, ProxyPort: 3128},
	}
}

func cidrsValid(cs []string) bool {
	for _, c := range cs {
		if _, err := netip.ParsePrefix(c); err != nil {
			return false
		}
	}
	return true
}

// Load reads path over the defaults. A missing file at the default path is not an error
// (the embedded defaults serve); a missing file that was asked for by flag is.
func Load(path string, required bool) (Config, error) {
	cfg := Default()
	data, err := regfile.Read(path, maxConfigBytes)
	if errors.Is(err, os.ErrNotExist) && !required {
		return cfg, cfg.Validate()
	}
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	if err := Parse(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	cfg.normalize()
	return cfg, cfg.Validate()
}

// maxConfigBytes bounds a config file; a larger one is refused unread.
const maxConfigBytes = 4 << 20

// normalize puts the fields that have one canonical form in it, the form the code using them
// compares with. An entry with none is left as it is, for Validate to refuse.
func (c *Config) normalize() {
	for _, list := range []*[]string{&c.Network.AllowedDomains, &c.Network.DeniedDomains} {
		for i, d := range *list {
			if n, err := permission.DomainPattern(d); err == nil {
				(*list)[i] = n
			}
		}
	}
}

// Parse decodes YAML (or JSON) into cfg, rejecting unknown fields, keys spelled in another
// case and keys given twice.
func Parse(data []byte, cfg *Config) error {
	// Strict: a key given twice would otherwise be read once, the last winning, and an admin
	// who edits the first would see no change.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		if m := duplicateKey.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("key %q is given twice in one section (near line %s); give each key once", m[2], m[1])
		}
		return err
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return nil
	}
	// Every key is checked against the settings before decoding, not only when the decoder
	// objects: encoding/json takes a key in any case (Pids_Max for pids_max), so a file a
	// reader takes for wrong would be read as right, and one given in both spellings would be
	// read once.
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		return err
	}
	if msg := unknownKey(doc, reflect.TypeOf(*cfg), ""); msg != "" {
		return errors.New(msg)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(cfg)
}

// duplicateKey is the YAML decoder's strict-mode error for a key given twice in one mapping.
var duplicateKey = regexp.MustCompile(`line (\d+): key "((?:[^"\\]|\\.)*)" already set in map`)

// unknownKey names the first key of doc that t has no setting for, with its section and the
// settings there are, or "". The decoder's own error names the key alone.
func unknownKey(doc any, t reflect.Type, at string) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() != reflect.Interface {
		if t.Kind() == reflect.Slice {
			if list, ok := doc.([]any); ok {
				for i, v := range list {
					if msg := unknownKey(v, t.Elem(), fmt.Sprintf("%s[%d]", at, i)); msg != "" {
						return msg
					}
				}
			}
			return ""
		}
		if t.Kind() == reflect.Map {
			if m, ok := doc.(map[string]any); ok {
				for k, v := range m {
					if msg := unknownKey(v, t.Elem(), join(at, k)); msg != "" {
						return msg
					}
				}
			}
			return ""
		}
		t = t.Elem()
	}
	m, ok := doc.(map[string]any)
	if t.Kind() != reflect.Struct || !ok {
		return ""
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, ok := jsonName(f); ok {
			fields[name] = f.Type
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ft, ok := fields[k]
		if !ok {
			for n := range fields {
				if strings.EqualFold(n, k) {
					return fmt.Sprintf("%s is not a setting; write %s (keys are case-sensitive)", join(at, k), join(at, n))
				}
			}
		}
		if !ok {
			known := slices.Sorted(maps.Keys(fields))
			section := "top level"
			if at != "" {
				section = at
			}
			return fmt.Sprintf("%s is not a setting (the settings at %s: %s)", join(at, k), section, strings.Join(known, ", "))
		}
		if msg := unknownKey(m[k], ft, join(at, k)); msg != "" {
			return msg
		}
	}
	return ""
}

func join(at, k string) string {
	if at == "" {
		return k
	}
	return at + "." + k
}

// Validate runs the named checks and joins every failure.
func (c Config) Validate() error {
	checks := []struct {
		name string
		ok   bool
	}{
		{"admin_group must not be empty", c.AdminGroup != ""},
		{"metrics.listen must be 127.0.0.1:PORT or unix:/abs/path; another address needs metrics.allow_remote: true", c.Metrics.CheckListen() == nil},
		{"network.mode must be none, proxy or host", c.Network.Mode == NetworkNone || c.Network.Mode == NetworkProxy || c.Network.Mode == NetworkHost},
		{"network.proxy_port must be between 1 and 65535", c.Network.ProxyPort >= 1 && c.Network.ProxyPort <= 65535},
		{"network.allow_private_cidrs must be CIDRs (10.0.0.0/8)", cidrsValid(c.Network.AllowPrivateCIDRs)},
		{"policy_dir must be absolute", filepath.IsAbs(c.PolicyDir)},
		{"max_request_bytes must be between 1 KiB and 64 MiB", c.MaxRequestBytes >= 1<<10 && c.MaxRequestBytes <= 64<<20},
		{"read_header_timeout_sec must be > 0", c.ReadHeaderTimeoutSec > 0},
		{"read_body_timeout_sec must be > 0", c.ReadBodyTimeoutSec > 0},
		{"idle_timeout_sec must be > 0", c.IdleTimeoutSec > 0},
		{fmt.Sprintf("drain_timeout_sec must be between 0 and %d: the unit's TimeoutStopSec=%d SIGKILLs the daemon after that, and the stop needs %d s after the drain to kill what is left and close the audit log",
			MaxDrainTimeoutSec, MaxDrainTimeoutSec+stopAfterDrainSec, stopAfterDrainSec), c.DrainTimeoutSec >= 0 && c.DrainTimeoutSec <= MaxDrainTimeoutSec},
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
		{"audit.max_input_bytes must be between 1 KiB and 1 MiB", c.Audit.MaxInputBytes >= 1<<10 && c.Audit.MaxInputBytes <= 1<<20},
		{"audit.retain_days must be >= 0", c.Audit.RetainDays >= 0},
		{"audit.syslog must be a local socket: /dev/log (or another absolute path), unixgram:/path or unix:/path; forward to a remote collector from the host's syslog daemon", syslogValid(c.Audit.Syslog)},
		{"audit.syslog_format must be record or ocsf", c.Audit.SyslogFormat == "" || c.Audit.SyslogFormat == "record" || c.Audit.SyslogFormat == "ocsf"},
		{"audit.min_free_bytes must be >= 0", c.Audit.MinFreeBytes >= 0},
		{"audit.max_bytes_per_user_hour must be >= 0", c.Audit.MaxBytesPerUserHour >= 0},
		{"limits.response_bytes must be between 1 MiB and 1 GiB", c.Limits.ResponseBytes >= 1<<20 && c.Limits.ResponseBytes <= 1<<30},
		{"limits.batch_calls must be between 1 and 1024", c.Limits.BatchCalls >= 1 && c.Limits.BatchCalls <= 1024},
		{"limits.connections_per_user must be between 1 and 4096", c.Limits.ConnectionsPerUser >= 1 && c.Limits.ConnectionsPerUser <= 4096},
		{"limits.calls_per_user must be between 1 and 4096", c.Limits.CallsPerUser >= 1 && c.Limits.CallsPerUser <= 4096},
		{"limits.sessions_per_user must be >= 0 (0: max_sessions_per_user)", c.Limits.SessionsPerUser >= 0},
		{"limits.persisted_bytes_per_user must be >= 1 MiB", c.Limits.PersistedBytesPerUser >= 1<<20},
		{"limits.tasks_per_user must be >= 1", c.Limits.TasksPerUser >= 1},
		{"limits.task_max_seconds must be >= 1", c.Limits.TaskMaxSeconds >= 1},
		{"limits.requests_per_second_per_user must be > 0", c.Limits.RequestsPerSecondPerUser > 0},
		{"limits.requests_burst_per_user must be >= 1", c.Limits.RequestsBurstPerUser >= 1},
		{"limits.egress_requests_per_second_per_user must be > 0", c.Limits.EgressRequestsPerSecondPerUser > 0},
		{"limits.egress_requests_burst_per_user must be >= 1", c.Limits.EgressRequestsBurstPerUser >= 1},
		{"limits.write_timeout_sec must be >= 1", c.Limits.WriteTimeoutSec >= 1},
		{"limits.rules_per_session must be between 1 and 1048576", c.Limits.RulesPerSession >= 1 && c.Limits.RulesPerSession <= 1<<20},
		{"limits.dirs_per_session must be between 1 and 4096", c.Limits.DirsPerSession >= 1 && c.Limits.DirsPerSession <= 4096},
		{"limits.user_memory_bytes must be 0 (half the host's memory) or >= 64 MiB", c.Limits.UserMemoryBytes == 0 || c.Limits.UserMemoryBytes >= 64<<20},
		{"limits.user_pids must be 0 (4096) or >= 16", c.Limits.UserPids == 0 || c.Limits.UserPids >= 16},
		{"sessions.idle_timeout_sec must be >= 60", c.Sessions.IdleTimeoutSec >= 60},
		{"bundle: decision logs go only to an https:// service unless allow_insecure_decision_logs: true", !c.Bundle.DecisionLogs || c.Bundle.URL == "" || strings.HasPrefix(c.Bundle.URL, "https://") || c.Bundle.AllowInsecureDecisionLogs},
		{"hooks must be command hooks with a command", hooksValid(c.Hooks)},
		{"approvals.timeout_sec must be between 1 and 86400", c.Approvals.TimeoutSec >= 1 && c.Approvals.TimeoutSec <= 86400},
		{"auto.classifier: give command or url, not both", c.Auto.Classifier.Command == "" || c.Auto.Classifier.URL == ""},
		{"auto.classifier.url must be http:// or https://", c.Auto.Classifier.URL == "" || strings.HasPrefix(c.Auto.Classifier.URL, "https://") || strings.HasPrefix(c.Auto.Classifier.URL, "http://")},
		{"auto.classifier.timeout_sec must be between 1 and 600", c.Auto.Classifier.TimeoutSec >= 1 && c.Auto.Classifier.TimeoutSec <= 600},
		{"auto.classifier.history must be between 0 and 100", c.Auto.Classifier.History >= 0 && c.Auto.Classifier.History <= 100},
		{"bundle.url needs bundle.resource", c.Bundle.URL == "" || c.Bundle.Resource != ""},
		{"bundle: signatures are required unless require_signature: false; give signing_key_file", c.Bundle.URL == "" || c.Bundle.SigningKeyFile != "" || (c.Bundle.RequireSignature != nil && !*c.Bundle.RequireSignature)},
	}
	// A negative number is named by its key here, where the file is read: the code it reaches
	// (the audit log's, the sandbox's) names its own field or nothing. A key's own check, which
	// would also fail, is left out so the key is named once.
	negative := map[string]bool{}
	var errs []error
	for _, key := range negativeKeys(reflect.ValueOf(c), "") {
		negative[key] = true
		errs = append(errs, fmt.Errorf("%s must not be negative", key))
	}
	for _, ck := range checks {
		key, _, _ := strings.Cut(ck.name, " ")
		if !ck.ok && !negative[key] {
			errs = append(errs, errors.New(ck.name))
		}
	}
	if err := checkSyscallNames(c.Sandbox.ExtraSyscalls); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkPaths("sandbox.deny_paths", c.Sandbox.DenyPaths)...)
	errs = append(errs, checkPaths("sandbox.cache_dirs", c.Sandbox.CacheDirs)...)
	for _, d := range c.Sandbox.PathAppend {
		if err := rootOnlyDir(d); err != nil {
			errs = append(errs, fmt.Errorf("sandbox.path_append: %q %w", d, err))
		}
	}
	if err := checkAdminGroup(c.AdminGroup); err != nil {
		errs = append(errs, err)
	}
	if err := c.checkHostUsers(); err != nil {
		return err
	}
	if err := c.checkHostDefault(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, checkDomains("network.allowed_domains", c.Network.AllowedDomains)...)
	errs = append(errs, checkDomains("network.denied_domains", c.Network.DeniedDomains)...)
	return errors.Join(errs...)
}

// negativeKeys names, by its key, each number below zero in v (a Config or a part of one at
// key at). No setting takes one.
func negativeKeys(v reflect.Value, at string) []string {
	var keys []string
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() < 0 {
			keys = append(keys, at)
		}
	case reflect.Float32, reflect.Float64:
		if v.Float() < 0 {
			keys = append(keys, at)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			keys = negativeKeys(v.Elem(), at)
		}
	case reflect.Slice:
		for i := range v.Len() {
			keys = append(keys, negativeKeys(v.Index(i), fmt.Sprintf("%s[%d]", at, i))...)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if name, ok := jsonName(t.Field(i)); ok {
				keys = append(keys, negativeKeys(v.Field(i), join(at, name))...)
			}
		}
	}
	return keys
}

// checkAdminGroup refuses an admin group the host does not have: membership is looked up by
// name, so a typo would make no one but root an admin, with nothing said. The default may be
// missing (the package creates it; a build from source may not have), as may a group NSS
// cannot answer for just now: the daemon looks the name up again on every check.
func checkAdminGroup(name string) error {
	if name == "" || name == Default().AdminGroup {
		return nil
	}
	if _, err := user.LookupGroup(name); errors.As(err, new(user.UnknownGroupError)) {
		return fmt.Errorf("admin_group: no group is named %q on this host (getent group %s finds none); name an existing group or create it (groupadd %s)", name, name, name)
	}
	return nil
}

// checkHostUsers refuses a network.host_users entry that is no user of the host (a uid is taken
// as it is): a typo there leaves the user it meant refused the host's network, and with
// network.mode: host every session of theirs with it.
func (c Config) checkHostUsers() error {
	for _, u := range c.Network.HostUsers {
		if u != "" && strings.Trim(u, "0123456789") == "" {
			continue
		}
		if _, err := user.Lookup(u); u == "" || errors.As(err, new(user.UnknownUserError)) {
			return fmt.Errorf("network.host_users: no user is named %q on this host (getent passwd %s finds none); name an existing user or a uid", u, u)
		}
	}
	return nil
}

// checkHostDefault refuses host as the default network when nobody but root may have it: a
// session that names no network takes the default, and the daemon refuses host to a user not
// in network.host_users, so every other user's sessions and hooks would fail at run time.
// Root-only use is said by listing root, which takes nothing from anyone.
func (c Config) checkHostDefault() error {
	if c.Network.Mode != NetworkHost || c.Sandbox.AllowNetwork || len(c.Network.HostUsers) > 0 {
		return nil
	}
	return errors.New("network.mode: host needs network.host_users: only root and the users listed there may have the host's network, " +
		"so every other user's sessions and hooks would be refused; list the users (host_users: [root] if only root's sessions run), " +
		"give it to everyone with sandbox.allow_network: true, or choose network.mode: proxy")
}

// checkPaths refuses each entry of a path list that is neither absolute nor under the owner's
// home ("~/"), naming it. A relative one was accepted and then refused by every call's
// sandbox spec, so one typo in a reload made every user's calls fail, each naming their
// own cwd as the problem.
func checkPaths(key string, entries []string) []error {
	var errs []error
	for _, p := range entries {
		if !filepath.IsAbs(p) && p != "~" && !strings.HasPrefix(p, "~/") {
			errs = append(errs, fmt.Errorf("%s: %q must be absolute or start with ~/ (the session owner's home)", key, p))
		}
	}
	return errs
}

// rootOnlyDir refuses a directory that anyone but root could change, or could change the way
// to: d and each directory above it, as written and as its links resolve, must be owned by
// root and writable by no group or other (a sticky /tmp too: anyone can create entries there).
func rootOnlyDir(d string) error {
	if !filepath.IsAbs(d) || filepath.Clean(d) != d || strings.ContainsRune(d, ':') {
		return errors.New("must be an absolute, clean path without a ':'")
	}
	r, err := filepath.EvalSymlinks(d)
	if err != nil {
		return fmt.Errorf("cannot be resolved: %w", err)
	}
	for _, p := range []string{d, r} {
		// What these lead to depends on the process that looks (/proc/self/cwd is the call's
		// own dir, writable by its user), not on what the daemon sees when it checks.
		for _, v := range []string{"/proc", "/dev", "/sys"} {
			if p == v || strings.HasPrefix(p, v+"/") {
				return fmt.Errorf("lies under %s, whose paths lead where the looking process decides", v)
			}
		}
	}
	for _, p := range []string{d, r} {
		for q := p; ; q = filepath.Dir(q) {
			fi, err := os.Stat(q)
			if err != nil {
				return fmt.Errorf("cannot be checked: %w", err)
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return fmt.Errorf("cannot be checked: %s has no owner", q)
			}
			if !fi.IsDir() || st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
				return fmt.Errorf("is not a directory only root can change: %s is %s, owned by uid %d", q, fi.Mode(), st.Uid)
			}
			if q == "/" {
				break
			}
		}
	}
	return nil
}

// checkDomains refuses each entry of a domain list that is not a domain pattern as a
// WebFetch(domain:…) rule takes it, naming the entry, or that is not in its normalized form
// (Load normalizes; a Config made otherwise must too): MatchDomain compares a pattern as it is,
// so `Secret.example.com` would match nothing and a deny of it would let everything by.
func checkDomains(key string, entries []string) []error {
	var errs []error
	for _, d := range entries {
		n, err := permission.DomainPattern(d)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %q is not a domain pattern (as in WebFetch(domain:…), e.g. example.com or *.example.com): %w", key, d, err))
		case n != d:
			errs = append(errs, fmt.Errorf("%s: %q is not normalized; write %q", key, d, n))
		}
	}
	return errs
}

// checkSyscallNames refuses a name libseccomp does not know. Building the filter skips a name
// it cannot resolve (one the kernel has only on another architecture resolves to a number
// that allows nothing here), so a typo would otherwise leave the call refused with nothing
// said. Every unknown name is in the error.
func checkSyscallNames(names []string) error {
	var unknown []string
	for _, n := range names {
		_, err := seccomp.GetSyscallFromName(n)
		switch {
		case errors.Is(err, seccomp.ErrSyscallDoesNotExist):
			unknown = append(unknown, strconv.Quote(n))
		case err != nil:
			return fmt.Errorf("sandbox.extra_syscalls: resolve %q: %w", n, err)
		}
	}
	switch len(unknown) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("sandbox.extra_syscalls: unknown syscall %s (the kernel's names, as in syscalls(2))", unknown[0])
	}
	return fmt.Errorf("sandbox.extra_syscalls: unknown syscalls %s (the kernel's names, as in syscalls(2))", strings.Join(unknown, ", "))
}

// syslogValid takes what the audit log's forwarder dials: "" (off), an absolute path (a
// datagram socket), or unixgram: or unix: and one. Anything else (udp:host:514, a host name)
// would be dialed as a relative path and every copy dropped with only a warning in the log.
func syslogValid(s string) bool {
	if s == "" {
		return true
	}
	if n, a, ok := strings.Cut(s, ":"); ok && (n == "unix" || n == "unixgram") {
		s = a
	}
	return filepath.IsAbs(s)
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
	for _, ms := range [][]HookMatcher{h.PreToolUse, h.PostToolUse, h.PermissionRequest} {
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

// jsonName is the key encoding/json gives the struct field f, false for a field it leaves out.
func jsonName(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if !f.IsExported() || name == "-" {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, true
}
