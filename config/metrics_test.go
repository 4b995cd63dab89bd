package config

import "testing"

// A TCP metrics listener exposes per-tool counts: it must stay on loopback unless the admin
// says otherwise.
func TestMetricsCheckListen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		m    Metrics
		ok   bool
	}{
		{"off", Metrics{}, true},
		{"loopback v4", Metrics{Listen: "127.0.0.1:9464"}, true},
		{"loopback v6", Metrics{Listen: "[::1]:9464"}, true},
		{"localhost", Metrics{Listen: "localhost:9464"}, true},
		{"unix", Metrics{Listen: "unix:/run/sandboxd/metrics.sock"}, true},
		{"unix relative", Metrics{Listen: "unix:metrics.sock"}, false},
		{"unix unclean", Metrics{Listen: "unix:/run/../tmp/m.sock"}, false},
		{"all interfaces", Metrics{Listen: ":9464"}, false},
		{"all interfaces allowed", Metrics{Listen: ":9464", AllowRemote: true}, true},
		{"lan", Metrics{Listen: "10.0.0.5:9464"}, false},
		{"lan allowed", Metrics{Listen: "10.0.0.5:9464", AllowRemote: true}, true},
		{"name", Metrics{Listen: "metrics.example:9464"}, false},
		{"no port", Metrics{Listen: "127.0.0.1"}, false},
		{"any port", Metrics{Listen: "127.0.0.1:0"}, true},
		{"bad port", Metrics{Listen: "127.0.0.1:http"}, false},
		{"port too big", Metrics{Listen: "127.0.0.1:70000", AllowRemote: true}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.m.CheckListen()
			if (err == nil) != tc.ok {
				t.Fatalf("CheckListen(%+v) = %v, want ok=%v", tc.m, err, tc.ok)
			}
			c := Default()
			c.Metrics = tc.m
			if (c.Validate() == nil) != tc.ok {
				t.Fatalf("Validate with %+v = %v, want ok=%v", tc.m, c.Validate(), tc.ok)
			}
		})
	}
}
