package audit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Syslog forwarding is a best-effort copy: the file is the record of truth and the durable
// write never waits on syslog. A full queue drops (and counts) rather than slow Append.
const (
	forwardQueue = 4096
	// sdID uses the documentation enterprise number of RFC 5612; a site with its own PEN can
	// filter on the SD-ID name alone.
	sdID = "sandboxd@32473"
	// priAuthprivInfo is facility authpriv (10) * 8 + severity informational (6): the records
	// carry commands and inputs, so they belong with the restricted authentication logs.
	priAuthprivInfo = 86
	maxSyslogMsg    = 60 << 10 // below the default unix datagram limits
)

// FormatRFC5424 renders r (whose JSON line is line, without newline) as one RFC 5424 message:
// <86>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID [sandboxd@32473 k="v" ...] JSON.
// MSGID is the kind; the structured data carries the fields a SIEM filters on; MSG is the
// verbatim record line, so its hash can be checked against the file.
func FormatRFC5424(r *Record, line []byte, host, app string, pid int) []byte {
	var b bytes.Buffer
	b.WriteString("<" + strconv.Itoa(priAuthprivInfo) + ">1 ")
	// RFC 5424 allows at most 6 fractional digits.
	b.WriteString(r.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"))
	b.WriteByte(' ')
	b.WriteString(headerField(host, 255))
	b.WriteByte(' ')
	b.WriteString(headerField(app, 48))
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(pid))
	b.WriteByte(' ')
	b.WriteString(headerField(string(r.Kind), 32))
	b.WriteString(" [" + sdID)
	param := func(k, v string) {
		if v == "" {
			return
		}
		b.WriteString(" " + k + `="`)
		b.WriteString(sdEscape(v))
		b.WriteByte('"')
	}
	param("seq", strconv.FormatUint(r.Seq, 10))
	param("hash", r.Hash)
	if r.Caller != nil {
		param("uid", strconv.FormatUint(uint64(r.Caller.UID), 10))
		param("user", r.Caller.User)
	}
	param("session", r.Session)
	param("tool", r.Tool)
	param("tool_use_id", r.ToolUseID)
	if r.Decision != nil {
		param("behavior", r.Decision.Behavior)
		param("rule", r.Decision.Rule)
	}
	if r.Outcome != nil {
		if r.Outcome.TaskID != "" {
			param("task_id", r.Outcome.TaskID) // the command's exit code is its task.end's
		} else {
			param("exit_code", strconv.Itoa(r.Outcome.ExitCode))
		}
		param("error", string(r.Outcome.Error))
	}
	b.WriteString("] ")
	if room := maxSyslogMsg - b.Len(); len(line) > room {
		line = line[:max(room, 0)] // the full record is in the file; this is a notification
	}
	b.Write(line)
	return b.Bytes()
}

// headerField makes s a valid header token: printable US-ASCII without spaces, or "-".
func headerField(s string, maxLen int) string {
	s = strings.Map(func(r rune) rune {
		if r < 33 || r > 126 {
			return -1
		}
		return r
	}, s)
	if len(s) > maxLen {
		s = s[:maxLen]
	}
	if s == "" {
		return "-"
	}
	return s
}

var sdEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, `]`, `\]`)

// sdEscape makes s a PARAM-VALUE: RFC 5424's three escapes, and every control character
// written as \\uXXXX (which a receiver unescapes to \uXXXX). The values come from callers (a
// report's tool, a call's tool_use_id): a raw newline would end the message on a stream
// socket's newline framing and start one of the caller's making, headers and all.
func sdEscape(s string) string {
	s = sdEscaper.Replace(s)
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			fmt.Fprintf(&b, `\\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isControl: C0, DEL and C1 controls, and the Unicode line and paragraph separators.
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029
}

type forwarder struct {
	network, addr string
	host, app     string
	pid           int
	ocsf          bool
	log           *zap.Logger
	ch            chan *Record
	wg            sync.WaitGroup
	dropped       atomic.Uint64
	conn          net.Conn
	lastDial      time.Time
}

func newForwarder(spec, app string, ocsf bool, log *zap.Logger) *forwarder {
	network, addr := "unixgram", spec
	if n, a, ok := strings.Cut(spec, ":"); ok && (n == "unix" || n == "unixgram") {
		network, addr = n, a
	}
	host, _ := os.Hostname()
	f := &forwarder{network: network, addr: addr, host: host, app: app, pid: os.Getpid(), ocsf: ocsf,
		log: log, ch: make(chan *Record, forwardQueue)}
	f.wg.Add(1)
	go f.run()
	return f
}

// send queues a durable record; it never blocks the writer.
func (f *forwarder) send(r *Record) {
	select {
	case f.ch <- r:
	default:
		if n := f.dropped.Add(1); n&(n-1) == 0 { // log at 1, 2, 4, 8, ... drops
			f.log.Warn("syslog forward queue full; dropping copies", zap.Uint64("dropped", n))
		}
	}
}

func (f *forwarder) close() {
	close(f.ch)
	f.wg.Wait()
}

func (f *forwarder) run() {
	defer f.wg.Done()
	defer func() {
		if f.conn != nil {
			f.conn.Close()
		}
	}()
	for r := range f.ch {
		var line []byte
		var err error
		if f.ocsf {
			line, err = OCSF(r, f.host)
		} else {
			line, _, err = encode(r)
		}
		if err != nil {
			continue
		}
		msg := FormatRFC5424(r, bytes.TrimSuffix(line, []byte("\n")), f.host, f.app, f.pid)
		if f.network == "unix" {
			msg = append(msg, '\n') // non-transparent framing (RFC 6587) on a stream socket
		}
		if err := f.write(msg); err != nil {
			f.dropped.Add(1)
		}
	}
}

func (f *forwarder) write(msg []byte) error {
	if f.conn == nil {
		// Do not hammer a dead syslog: at most one dial per second.
		if time.Since(f.lastDial) < time.Second {
			return fmt.Errorf("syslog %s: not connected", f.network)
		}
		f.lastDial = time.Now()
		c, err := net.Dial(f.network, f.addr)
		if err != nil {
			return fmt.Errorf("dial syslog: %w", err)
		}
		f.conn = c
	}
	_ = f.conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := f.conn.Write(msg); err != nil {
		f.conn.Close()
		f.conn = nil
		return fmt.Errorf("write syslog: %w", err)
	}
	return nil
}
