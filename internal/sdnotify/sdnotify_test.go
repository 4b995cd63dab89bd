package sdnotify

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// The datagrams a unit of Type=notify sees, in the order the daemon sends them; and
// NOTIFY_SOCKET does not stay in the environment for children to inherit.
func TestNotify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	n, err := FromEnv()
	if err != nil || !n.Enabled() {
		t.Fatalf("FromEnv: %v enabled=%v", err, n.Enabled())
	}
	if v, ok := os.LookupEnv("NOTIFY_SOCKET"); ok {
		t.Fatalf("NOTIFY_SOCKET left in the environment: %q", v)
	}
	tests := []struct {
		name  string
		state string
		want  *regexp.Regexp
	}{
		{"ready", Ready, regexp.MustCompile(`^READY=1$`)},
		{"reloading", Reloading(), regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*$`)},
		{"stopping", Stopping, regexp.MustCompile(`^STOPPING=1$`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := n.Notify(tc.state); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 4096)
			k, err := conn.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want.Match(buf[:k]) {
				t.Fatalf("got %q, want %s", buf[:k], tc.want)
			}
		})
	}
}

// Without a service manager nothing is sent and nothing fails; an address sandboxd cannot
// use is reported, not guessed at.
func TestNotifyDisabled(t *testing.T) {
	tests := []struct {
		name, env string
		wantErr   bool
	}{
		{"unset", "", false},
		{"vsock", "vsock:2:1234", true},
		{"relative", "notify.sock", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NOTIFY_SOCKET", tc.env)
			n, err := FromEnv()
			if (err != nil) != tc.wantErr {
				t.Fatalf("FromEnv(%q) err = %v, want error %v", tc.env, err, tc.wantErr)
			}
			if n.Enabled() {
				t.Fatal("enabled without a usable socket")
			}
			if err := n.Notify(Ready); err != nil {
				t.Fatalf("Notify on a disabled notifier: %v", err)
			}
		})
	}
}
