package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/internal/harness"
	"github.com/sandboxd/sandboxd/protocol"
)

// egressBytes is the download of the egress section's throughput rows.
const egressBytes = 200 << 20

// egress measures a proxied session's downloads with curl, through the daemon's filtering
// proxy (plain HTTP forwarded, and a CONNECT tunnel as HTTPS takes), against the same curl on
// the host straight to the origin: a 200 MB download and 1 000 small requests on one
// connection. The origin is on the host's loopback (the bench daemon's allow_private_cidrs
// lets the proxy reach it), in this process, so both paths share the same two ends and the
// ratio is the proxy's hop. A bare TCP relay (bytes copied both ways, nothing parsed or
// decided), a process of its own as the daemon is, is timed beside them: no proxy can beat the
// hop it adds, so its ratio is the floor this host puts under the proxy's.
func (e *env) egress(ctx context.Context) error {
	const sec = "egress proxy (curl in a proxied session vs curl on the host)"
	if _, err := exec.LookPath("curl"); err != nil {
		return fmt.Errorf("egress needs curl: %w", err)
	}
	chunk := make([]byte, 256<<10)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			w.Header().Set("Content-Length", "2")
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(egressBytes))
		for left := egressBytes; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	origin := "http://" + l.Addr().String()
	relay, stopRelay, err := startRelay(ctx, l.Addr().String())
	if err != nil {
		return err
	}
	defer stopRelay()
	// curl connects to the relay for the origin's host:port and speaks to it as to the origin.
	viaRelay := "--connect-to " + l.Addr().String() + ":" + relay + " "
	sid, err := e.session(ctx, protocol.CreateSession{Mode: "bypassPermissions", Network: "proxy",
		Rules: protocol.Rules{Allow: []string{"WebFetch(domain:127.0.0.1)"}}})
	if err != nil {
		return err
	}
	// curl's time for its transfers; NO_PROXY names loopback, so the proxy is given by hand.
	timed := func(proxied bool, args string) (time.Duration, error) {
		cmd := "curl -sS --fail -o /dev/null -w '%{time_total}\\n' " + args
		var out string
		if proxied {
			var err error
			if out, err = e.bash(ctx, sid, `curl() { command curl --noproxy '' -x "$HTTP_PROXY" "$@"; }; `+cmd); err != nil {
				return 0, err
			}
		} else {
			b, err := exec.CommandContext(ctx, "bash", "-c", cmd).Output()
			if err != nil {
				return 0, fmt.Errorf("curl on the host: %w", err)
			}
			out = string(b)
		}
		var total time.Duration
		for _, f := range strings.Fields(out) {
			s, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return 0, fmt.Errorf("curl said %q", out)
			}
			total += time.Duration(s * float64(time.Second))
		}
		return total, nil
	}
	rounds := e.o.pick(5, 1)
	for _, row := range []struct {
		name, args, unit string
		relayed          bool // also timed through the bare relay
	}{
		{"200 MB download, forwarded (plain HTTP)", origin + "/big", "MB/s", true},
		{"200 MB download, CONNECT tunnel (as HTTPS goes)", "-p " + origin + "/big", "MB/s", false},
		{"1 000 small requests on one connection", "'" + origin + "/small?[1-1000]'", "req/s", true},
	} {
		var direct, proxied, relayed time.Duration
		for range rounds {
			d, err := timed(false, row.args)
			if err != nil {
				return err
			}
			p, err := timed(true, row.args)
			if err != nil {
				return fmt.Errorf("%s through the proxy: %w", row.name, err)
			}
			direct, proxied = direct+d, proxied+p
			if row.relayed {
				r, err := timed(false, viaRelay+row.args)
				if err != nil {
					return fmt.Errorf("%s through the bare relay: %w", row.name, err)
				}
				relayed += r
			}
		}
		per := float64(rounds) * egressBytes / (1 << 20)
		if row.unit == "req/s" {
			per = float64(rounds) * 1000
		}
		e.rep.add(Row{Section: sec, Name: row.name + " through the proxy", Value: per / proxied.Seconds(), Unit: row.unit,
			Baseline: per / direct.Seconds(), BaselineName: "curl on the host, straight to the origin",
			Note: fmt.Sprintf("%d rounds; origin, proxy and curl share this host's CPUs (ratio goal: >= 0.8x download, >= 0.5x small requests)", rounds)})
		if row.relayed {
			e.rep.add(Row{Section: sec, Name: row.name + " through a bare TCP relay (the floor for any proxy)", Value: per / relayed.Seconds(), Unit: row.unit,
				Baseline: per / direct.Seconds(), BaselineName: "curl on the host, straight to the origin",
				Note: "the same hop with nothing parsed, decided or audited: a proxy's ratio cannot beat this one's"})
		}
	}
	return nil
}

// startRelay starts "sbbench relay target" and returns the address it relays from, and how to
// stop it.
func startRelay(ctx context.Context, target string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.CommandContext(ctx, self, "relay", target)
	stop, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the relay: %w", err)
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("the relay said no address: %w", err)
	}
	return strings.TrimSpace(addr), func() { stop.Close(); _ = cmd.Wait() }, nil
}

// runRelay is the bare relay of the egress section, started by it as "sbbench relay TARGET": it
// listens on loopback, prints its address, and copies each connection's bytes to and from a new
// connection to TARGET, both ways, until its stdin closes.
func runRelay(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sbbench relay TARGET (the egress section starts it)")
		return 2
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbbench relay:", err)
		return 1
	}
	fmt.Println(l.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		l.Close()
	}()
	for {
		c, err := l.Accept()
		if err != nil {
			return 0
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", args[0])
			if err != nil {
				return
			}
			defer u.Close()
			go func() {
				_, _ = io.Copy(u, c)
				_ = u.(*net.TCPConn).CloseWrite()
			}()
			_, _ = io.Copy(c, u)
		}()
	}
}

// bash runs a Bash call in sid and returns its stdout; an error unless it exits 0.
func (e *env) bash(ctx context.Context, sid, command string) (string, error) {
	e.calls.Add(1)
	res, err := e.c.Call(ctx, sid, protocol.CallRequest{Tool: "Bash", Input: harness.Input(map[string]any{"command": command, "timeout": 600000})})
	if err != nil {
		return "", err
	}
	out, _ := res.Data["stdout"].(string)
	if code, _ := res.Data["exit_code"].(float64); res.IsError || code != 0 {
		errOut, _ := res.Data["stderr"].(string)
		return "", fmt.Errorf("exit %v: %.300s %.300s", res.Data["exit_code"], out, errOut)
	}
	return out, nil
}
