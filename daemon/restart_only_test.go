package daemon

import (
	"slices"
	"testing"

	"github.com/sandboxd/sandboxd/config"
)

// TestRestartOnlyNamesWhatAReloadLeaves: a reload that changes a setting only a start applies
// says so, naming it, rather than leaving the old value in force without a word.
func TestRestartOnlyNamesWhatAReloadLeaves(t *testing.T) {
	for name, change := range map[string]func(*config.Config){
		"limits.user_memory_bytes":    func(c *config.Config) { c.Limits.UserMemoryBytes = 1 << 30 },
		"limits.user_pids":            func(c *config.Config) { c.Limits.UserPids = 100 },
		"network.allow_private_cidrs": func(c *config.Config) { c.Network.AllowPrivateCIDRs = []string{"10.0.0.0/8"} },
		"network.proxy_port":          func(c *config.Config) { c.Network.ProxyPort = 3129 },
		"sandbox.cgroup_name":         func(c *config.Config) { c.Sandbox.CgroupName = "other" },
	} {
		var old, cfg config.Config
		change(&cfg)
		if got := restartOnly(old, cfg); !slices.Contains(got, name) {
			t.Errorf("changing %s: restartOnly says %v", name, got)
		}
	}
}
