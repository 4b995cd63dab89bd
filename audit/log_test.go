package audit

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

func openTest(t *testing.T, cfg Config) *Log {
	t.Helper()
	if cfg.Dir == "" {
		cfg.Dir = filepath.Join(t.TempDir(), "audit")
	}
	l, err := Open(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

func callRecord(i int) *Record {
	return &Record{
		Kind:      KindCallEnd,
		Caller:    &Caller{UID: uint32(1000 + i%3), GID: 1000, PID: 4242, User: "u" + string(rune('a'+i%3))},
		Session:   "s" + string(rune('0'+i%2)),
		Mode:      "default",
		Tool:      "Bash",
		ToolUseID: "toolu_" + string(rune('a'+i%26)),
		Input:     []byte(`{"command":"curl -H 'Authorization: Bearer abcdefghijklmnop' https://x","n":` + itoa(i) + `}`),
		Decision:  &Decision{Behavior: "allow", Reason: "rule", Rule: "Bash(curl *)", Source: "session", Step: "allow_rule"},
		Outcome:   &Outcome{ExitCode: 0, DurationMS: 12, CPUMS: 3, PeakMemoryBytes: 1 << 20, OutputBytes: 42},
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func appendN(t *testing.T, l *Log, n int) {
	t.Helper()
	for i := range n {
		if err := l.Append(context.Background(), callRecord(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

func mustVerify(t *testing.T, dir string, l *Log) *VerifyReport {
	t.Helper()
	rep, err := VerifyDir(dir, l.PublicKey())
	if err != nil {
		t.Fatalf("verify: %v (report %+v)", err, rep)
	}
	return rep
}

func TestAppendVerifyQuery(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{})
	dir := l.Dir()
	r := callRecord(0)
	if err := l.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if r.Seq != 1 || r.Prev != "" || len(r.Hash) != 64 || r.Time.IsZero() {
		t.Fatalf("append did not fill chain fields: %+v", r)
	}
	if strings.Contains(string(r.Input), "abcdefghijklmnop") || !strings.HasPrefix(r.InputDigest, "sha256:") {
		t.Fatalf("input not redacted: %s %s", r.Input, r.InputDigest)
	}
	appendN(t, l, 20)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir, l)
	if rep.Records != 22 || rep.Checkpoints != 1 || rep.HeadSeq != 22 {
		t.Fatalf("report: %+v", rep)
	}
	uid := uint32(1001)
	var got int
	for rec, err := range Query(dir, Filter{UID: &uid, Kinds: []Kind{KindCallEnd}}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Caller.UID != uid {
			t.Fatalf("filter leaked uid %d", rec.Caller.UID)
		}
		got++
	}
	if got != 7 { // i%3==1 for i in 0..19
		t.Fatalf("query uid 1001: got %d records, want 7", got)
	}
	var sb strings.Builder
	n, err := Export(&sb, dir, Filter{Session: "s1"})
	if err != nil || n != 10 || strings.Count(sb.String(), "\n") != 10 {
		t.Fatalf("export: n=%d err=%v", n, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(sb.String()), "\n") {
		if _, err := parseLine([]byte(line)); err != nil {
			t.Fatalf("exported line does not self-verify: %v", err)
		}
	}
	if err := l.Append(context.Background(), callRecord(1)); !errors.Is(err, ErrClosed) || errcode.Of(err) != errcode.AuditUnavailable {
		t.Fatalf("append after close: %v", err)
	}
}

func TestAppendRejectsReservedAndUnknownKinds(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{})
	defer l.Close()
	for _, k := range []Kind{KindCheckpoint, KindRotate, KindTornTail, "call.bogus", ""} {
		err := l.Append(context.Background(), &Record{Kind: k})
		if errcode.Of(err) != errcode.Validation {
			t.Errorf("kind %q: got %v, want validation", k, err)
		}
	}
}

func TestConcurrentAppendsGroupCommit(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{CheckpointEvery: 100})
	dir := l.Dir()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := l.Append(context.Background(), callRecord(g*20+i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, dir, l)
	if rep.Records < 640 || rep.Checkpoints < 6 {
		t.Fatalf("report %+v", rep)
	}
}

// A record nobody waits to be durable for (a call's end, a proxied request's net.connect)
// starts no fsync of its own: a run of them shares one, writtenSyncDelay after the first (or
// the next durable record's), instead of costing the disk and the CPUs one each.
func TestWrittenRecordsShareAnFsync(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{CheckpointEvery: 1000})
	ctx := context.Background()
	if err := l.Append(ctx, callRecord(0)); err != nil {
		t.Fatal(err)
	}
	before, start := l.syncs.Load(), time.Now()
	const n = 50
	for i := range n {
		if err := l.AppendWritten(ctx, callRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	// One sync per writtenSyncDelay that went by at most (a slow machine sees a few).
	bound := 1 + int64(time.Since(start)/writtenSyncDelay)
	if got := l.syncs.Load() - before; got > bound {
		t.Fatalf("%d written-only records took %d fsyncs in %v, want at most %d", n, got, time.Since(start), bound)
	}
	// The timer syncs them without any further record.
	deadline := time.Now().Add(5 * time.Second)
	for l.syncs.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("written-only records were never synced")
		}
		time.Sleep(time.Millisecond)
	}
	// A durable record after written ones starts its sync at once.
	if err := l.AppendWritten(ctx, callRecord(n)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := l.Append(ctx, callRecord(n+1)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d >= time.Second {
		t.Fatalf("a durable Append after a written one took %v", d)
	}
	dir := l.Dir()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, dir, l); rep.Records < n+2 {
		t.Fatalf("report %+v", rep)
	}
}

func TestReopenContinuesChainAndFilesAreRootOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l := openTest(t, Config{Dir: dir})
	appendN(t, l, 5)
	l.Close()
	l = openTest(t, Config{Dir: dir})
	appendN(t, l, 5)
	pub := l.PublicKey()
	l.Close()
	rep, err := VerifyDir(dir, pub)
	if err != nil || rep.Records != 12 { // 10 + 2 close checkpoints
		t.Fatalf("verify after reopen: %v %+v", err, rep)
	}
	st, _ := os.Stat(dir)
	if st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", st.Mode().Perm())
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
	// A loosened private key is refused, not used.
	os.Chmod(filepath.Join(dir, keyFile), 0o644)
	if _, err := Open(Config{Dir: dir}, zaptest.NewLogger(t)); !errors.Is(err, ErrBadKey) {
		t.Fatalf("open with 0644 key: %v", err)
	}
}

func TestTornTailMovedAsideAndRecorded(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l := openTest(t, Config{Dir: dir})
	appendN(t, l, 3)
	pub := l.PublicKey()
	l.Close()
	files, _ := ListFiles(dir)
	torn := []byte(`{"v":1,"seq":5,"time":"2026-`)
	f, _ := os.OpenFile(files[0], os.O_WRONLY|os.O_APPEND, 0)
	f.Write(torn)
	f.Close()
	if _, err := VerifyDir(dir, pub); !errors.Is(err, ErrTornTail) {
		t.Fatalf("verify with torn tail: %v", err)
	}
	l = openTest(t, Config{Dir: dir})
	appendN(t, l, 1)
	l.Close()
	rep, err := VerifyDir(dir, pub)
	if err != nil || rep.TornTails != 1 {
		t.Fatalf("verify after recovery: %v %+v", err, rep)
	}
	aside, _ := filepath.Glob(files[0] + tornInfix + "*")
	if len(aside) != 1 {
		t.Fatalf("torn side file: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != string(torn) {
		t.Fatalf("side file holds %q", b)
	}
	var found bool
	for r := range Query(dir, Filter{Kinds: []Kind{KindTornTail}}) {
		found = r.Detail["bytes"] == itoa(len(torn)) && len(r.Detail["sha256"]) == 64
	}
	if !found {
		t.Fatal("no audit.torn_tail record with bytes and sha256")
	}
}

func TestRotationAndRetention(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "audit")
	l := openTest(t, Config{Dir: dir, MaxFileBytes: 4 << 10, CheckpointEvery: 7})
	appendN(t, l, 60)
	l.Close()
	files, _ := ListFiles(dir)
	if len(files) < 4 {
		t.Fatalf("expected rotation, got %d files", len(files))
	}
	rep := mustVerify(t, dir, l)
	if rep.Pruned {
		t.Fatal("unpruned log reported pruned")
	}
	// Removing a middle file breaks the chain.
	os.Rename(files[1], files[1]+".bak")
	if _, err := VerifyDir(dir, l.PublicKey()); !errors.Is(err, ErrTampered) {
		t.Fatalf("missing middle file: %v", err)
	}
	os.Rename(files[1]+".bak", files[1])

	l = openTest(t, Config{Dir: dir, MaxFileBytes: 4 << 10, Retain: 3})
	appendN(t, l, 30)
	l.Close()
	files, _ = ListFiles(dir)
	if len(files) != 3 {
		t.Fatalf("retain 3: %d files", len(files))
	}
	rep = mustVerify(t, dir, l)
	if !rep.Pruned || rep.FirstSeq == 1 {
		t.Fatalf("pruned log: %+v", rep)
	}
}

func TestIntervalCheckpointAndHead(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{CheckpointInterval: 20 * time.Millisecond})
	defer l.Close()
	appendN(t, l, 3)
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := ReadHead(filepath.Join(l.Dir(), headFile))
		if err == nil && h.Seq == 4 {
			if !verifyHeadSig(l.PublicKey(), h) {
				t.Fatal("head signature")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no interval checkpoint: %v %+v", err, h)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syslogMessage appends r to a log that forwards to a socket of the test's and returns the
// message the socket got.
func syslogMessage(t *testing.T, cfg Config, r *Record) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "log.sock")
	pc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	cfg.SyslogAddr = sock
	l := openTest(t, cfg)
	if err := l.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1<<16)
	n, _, err := pc.ReadFrom(buf)
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestSyslogForwarding(t *testing.T) {
	t.Parallel()
	r := callRecord(1)
	r.Decision.Rule = `Bash(x "y" ])`
	msg := syslogMessage(t, Config{SyslogApp: "sbtest"}, r)
	for _, want := range []string{"<86>1 ", " sbtest ", " call.end [sandboxd@32473 seq=\"1\" hash=\"" + r.Hash + "\"",
		` uid="1001"`, ` rule="Bash(x \"y\" \])"`, `] {"v":2,"seq":1,`} {
		if !strings.Contains(msg, want) {
			t.Errorf("syslog message lacks %q:\n%s", want, msg)
		}
	}
	ts := strings.Fields(msg)[1]
	if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || len(ts) != len("2006-01-02T15:04:05.000000Z") {
		t.Errorf("timestamp %q: %v", ts, err)
	}
	line := msg[strings.Index(msg, "] {")+2:]
	if _, err := parseLine([]byte(line)); err != nil {
		t.Errorf("forwarded record does not self-verify: %v", err)
	}
}

// TestSyslogParamsCannotFrame: a caller's value with a line break in it (a report's tool) stays
// inside its parameter: on a stream socket, whose frames end at a newline, it would otherwise
// end the record's message and start one the caller wrote.
func TestSyslogParamsCannotFrame(t *testing.T) {
	t.Parallel()
	r := callRecord(1)
	r.Tool = "Bash\n<86>1 2026-01-01T00:00:00.000000Z vm sandboxd 1 daemon.stop - stopped\r\u2028\u0085"
	r.ToolUseID = "id\x00\x1b[2J"
	msg := syslogMessage(t, Config{SyslogApp: "sbtest"}, r)
	// The record line after the structured data is the canonical JSON (JSON escapes the C0
	// controls); the header and parameters before it hold none at all.
	if strings.ContainsAny(msg, "\n\r\x00") {
		t.Fatalf("a line break reached the message:\n%q", msg)
	}
	if head := msg[:strings.Index(msg, "] {")]; strings.ContainsAny(head, "\x1b\u2028\u0085") {
		t.Fatalf("a control character reached the structured data:\n%q", head)
	}
	if want := `tool="Bash\\u000a<86>1 `; !strings.Contains(msg, want) {
		t.Errorf("syslog message lacks %q:\n%s", want, msg)
	}
}

func TestTailFollowsAcrossRotation(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{MaxFileBytes: 2 << 10})
	defer l.Close()
	appendN(t, l, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan uint64, 1000)
	done := make(chan error, 1)
	// Caught up once, when the newest file is first read to its end: before the records
	// appended after the first two were seen (the first two may come before or after).
	var caughtUp atomic.Int32
	seenAtCatchUp := -1
	go func() {
		done <- Tail(ctx, l.Dir(), Filter{Kinds: []Kind{KindCallEnd}}, true, func() {
			caughtUp.Add(1)
			seenAtCatchUp = len(seen)
		}, func(r *Record) error {
			seen <- r.Seq
			return nil
		})
	}()
	got := 0
	timeout := time.After(10 * time.Second)
	for got < 2 { // Tail starts at the newest file: let it get there before rotating
		select {
		case <-seen:
			got++
		case <-timeout:
			t.Fatalf("tail saw %d of 2", got)
		}
	}
	appendN(t, l, 20)
	for got < 22 {
		select {
		case <-seen:
			got++
		case <-timeout:
			t.Fatalf("tail saw %d of 22", got)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := caughtUp.Load(); n != 1 || seenAtCatchUp < 0 || seenAtCatchUp > 2 {
		t.Errorf("caught up %d times, with %d records read; want once, before the 20 appended later", n, seenAtCatchUp)
	}
}

// A log that kept its key pair in its own directory has it moved to KeyDir: the same key
// signs on, and a copy of the log directory no longer carries it.
func TestKeyMovesOutOfLogDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, keyDir := filepath.Join(base, "audit"), filepath.Join(base, "audit-key")
	old := openTest(t, Config{Dir: dir})
	pub := old.PublicKey()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	l := openTest(t, Config{Dir: dir, KeyDir: keyDir})
	if !l.PublicKey().Equal(pub) {
		t.Fatal("the moved log signs with a new key")
	}
	for _, name := range []string{keyFile, pubFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s still in the log directory: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(keyDir, name)); err != nil {
			t.Errorf("%s not in the key directory: %v", name, err)
		}
	}
	if err := l.Append(context.Background(), &Record{Kind: KindCallStart, Caller: &Caller{UID: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyDir(dir, pub); err != nil {
		t.Fatalf("verify across the move: %v", err)
	}
	// A different private key left in the log directory is refused, not guessed between.
	other := filepath.Join(base, "other")
	o := openTest(t, Config{Dir: other})
	o.Close()
	b, _ := os.ReadFile(filepath.Join(other, keyFile))
	os.WriteFile(filepath.Join(dir, keyFile), b, 0o600)
	if _, err := Open(Config{Dir: dir, KeyDir: keyDir}, nil); !errors.Is(err, ErrBadKey) {
		t.Fatalf("two different keys: %v, want ErrBadKey", err)
	}
}
