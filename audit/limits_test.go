package audit

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

func TestInputTruncated(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{MaxInputBytes: 1 << 10})
	defer l.Close()
	cases := []struct {
		name      string
		input     string
		truncated bool
	}{
		{"small input kept", `{"command":"ls"}`, false},
		{"large input truncated", `{"command":"` + strings.Repeat("é\\\"x", 2000) + `"}`, true},
		{"large detail-free input with many keys", `{"a":"` + strings.Repeat("y", 5000) + `","b":1}`, true},
		{"large write keeps its path", `{"content":"` + strings.Repeat("w", 5000) + `","file_path":"/home/u/proj/main.go"}`, true},
		{"large multi-edit keeps its path", `{"edits":[{"new_string":"` + strings.Repeat("n", 3000) + `","old_string":"` + strings.Repeat("o", 3000) + `"}],"file_path":"/home/u/proj/x.go"}`, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := callRecord(0)
			r.Input = json.RawMessage(tc.input)
			r.Detail = map[string]string{"decided_input": strings.Repeat("z", 5000)}
			if err := l.Append(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			_, digest := Redact(json.RawMessage(tc.input))
			if r.InputDigest != digest {
				t.Errorf("digest %s, want the digest of the whole input %s", r.InputDigest, digest)
			}
			if len(r.Input) > 1<<10 {
				t.Errorf("stored input is %d bytes, more than max_input_bytes", len(r.Input))
			}
			var got struct {
				Truncated bool   `json:"truncated"`
				Bytes     int    `json:"bytes"`
				Preview   string `json:"preview"`
			}
			_ = json.Unmarshal(r.Input, &got)
			if got.Truncated != tc.truncated {
				t.Fatalf("truncated = %v, want %v: %s", got.Truncated, tc.truncated, r.Input)
			}
			if tc.truncated && (got.Bytes < len(tc.input)-10 || got.Preview == "" || !strings.HasPrefix(tc.input, got.Preview[:10])) {
				t.Errorf("truncated form %+v does not describe the input", got)
			}
			// The short fields stay whole, after the long ones cut.
			if i := strings.Index(tc.input, `"file_path":`); tc.truncated && i >= 0 && !strings.Contains(got.Preview, tc.input[i:len(tc.input)-1]) {
				t.Errorf("the preview lost the file path: %s", got.Preview)
			}
		})
	}
	l.Close()
	mustVerify(t, l.Dir(), l)
}

// A large input keeps the fields that name what the call acted on, whole and ahead of the
// preview. A MultiEdit of 300 edits sorts its edits before its file_path, and the preview, cut
// by bytes, lost the path: sbctl audit query --grep target.txt and the OCSF file.path could not
// say which file was edited.
func TestTruncatedInputKeepsPaths(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{MaxInputBytes: 256 << 10})
	defer l.Close()
	edit := `{"new_string":"` + strings.Repeat("n", 500) + `","old_string":"` + strings.Repeat("o", 500) + `"}`
	edits := strings.TrimSuffix(strings.Repeat(edit+",", 300), ",")
	cases := []struct {
		name, tool, input, key, path string
	}{
		{"multi-edit of 300 edits", "MultiEdit", `{"edits":[` + edits + `],"file_path":"/home/u/proj/target.txt"}`, "file_path", "/home/u/proj/target.txt"},
		{"notebook edit", "NotebookEdit", `{"cell_id":"c1","new_source":"` + strings.Repeat("x", 300<<10) + `","notebook_path":"/home/u/nb.ipynb"}`,
			"notebook_path", "/home/u/nb.ipynb"},
		{"grep", "Grep", `{"path":"/home/u/src","pattern":"` + strings.Repeat("a|", 150<<10) + `"}`, "path", "/home/u/src"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := callRecord(0)
			r.Tool, r.Input = tc.tool, json.RawMessage(tc.input)
			if err := l.Append(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			in := inputFields(r.Input)
			if len(r.Input) > 256<<10 || in["truncated"] != "" || !strings.Contains(string(r.Input), `"truncated":true`) || in["preview"] == "" {
				t.Fatalf("stored input is not the truncated form (%d bytes): %.200s", len(r.Input), r.Input)
			}
			if in[tc.key] != tc.path {
				t.Errorf("%s = %q, want %q whole: %.200s", tc.key, in[tc.key], tc.path, r.Input)
			}
			b, err := OCSF(r, "host1")
			if err != nil {
				t.Fatal(err)
			}
			var ev struct {
				File struct {
					Path string `json:"path"`
				} `json:"file"`
			}
			if err := json.Unmarshal(b, &ev); err != nil || ev.File.Path != tc.path {
				t.Errorf("OCSF file.path = %q (%v), want %q", ev.File.Path, err, tc.path)
			}
		})
	}
	// A path too long to fit is cut, saying so, and the record stays within the bound.
	long := `{"content":"` + strings.Repeat("w", 4000) + `","file_path":"/` + strings.Repeat("d/", 2000) + `f"}`
	got := truncatedInput(json.RawMessage(long), 1<<10)
	if len(got) > 1<<10 || !strings.Contains(inputFields(got)["file_path"], "[truncated: 4002 bytes]") {
		t.Fatalf("a path longer than the bound: %d bytes: %s", len(got), got)
	}
}

func TestRetentionKeepsYoungRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/audit"
	l := openTest(t, Config{Dir: dir, MaxFileBytes: 4 << 10, Retain: 2, MinRetainAge: time.Hour})
	appendN(t, l, 60)
	l.Close()
	files, _ := ListFiles(dir)
	if len(files) <= 2 {
		t.Fatalf("retain_files removed files younger than the minimum retention: %d left", len(files))
	}
	rep := mustVerify(t, dir, l)
	if rep.Pruned || rep.FirstSeq != 1 {
		t.Fatalf("young records pruned: %+v", rep)
	}
}

func TestLowSpaceRefusesNewWork(t *testing.T) {
	t.Parallel()
	// More free space than any disk has: the volume is always "short".
	l := openTest(t, Config{MinFreeBytes: 1 << 62})
	defer l.Close()
	cases := []struct {
		kind    Kind
		refused bool
	}{
		{KindCallDecide, true},
		{KindCallStart, true},
		{KindSessionCreate, true},
		// What a user's agent or programs add at will: an agent's reports, a proxied
		// session's connections.
		{KindCallReport, true},
		{KindNetConnect, true},
		{KindSessionDelete, false},
		{KindApprovalResolve, false},
		{KindDaemonStop, false},
	}
	if !l.Healthy() {
		t.Error("healthy before any record looked at the space")
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			err := l.Append(context.Background(), &Record{Kind: tc.kind})
			if tc.refused {
				if !errors.Is(err, ErrLowSpace) || errcode.Of(err) != errcode.AuditUnavailable {
					t.Fatalf("err = %v, want audit_unavailable low space", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	// Short of space, the log says it is not taking new work (healthz: degraded), though its
	// writes succeed.
	if l.Healthy() {
		t.Error("healthy while the volume is short of space")
	}
}

// TestOwnerBudget: one uid's records of new work stop at its hourly bytes while another uid's,
// root's, the ending of work and what ran (call.end) still go in.
func TestOwnerBudget(t *testing.T) {
	t.Parallel()
	l := openTest(t, Config{MaxBytesPerUserHour: 64 << 10})
	defer l.Close()
	ctx := context.Background()
	input := json.RawMessage(`{"command":"` + strings.Repeat("x", 8<<10) + `"}`)
	rec := func(uid uint32, k Kind) *Record {
		return &Record{Kind: k, Caller: &Caller{UID: uid}, Input: input}
	}
	var refused error
	for i := range 64 {
		if err := l.Append(ctx, rec(1000, KindCallStart)); err != nil {
			if i < 4 {
				t.Fatalf("refused after %d records of about 8 KiB within a 64 KiB budget: %v", i, err)
			}
			refused = err
			break
		}
	}
	if !errors.Is(refused, ErrOwnerBudget) || errcode.Of(refused) != errcode.RateLimited {
		t.Fatalf("64 records of about 8 KiB each against a 64 KiB budget: %v, want rate_limited", refused)
	}
	for _, k := range []Kind{KindCallDecide, KindCallReport, KindNetConnect, KindSessionCreate} {
		if err := l.Append(ctx, rec(1000, k)); !errors.Is(err, ErrOwnerBudget) {
			t.Errorf("%s of the spent uid: %v, want refused", k, err)
		}
	}
	notRun := rec(1000, KindCallEnd)
	notRun.NotRun = true
	if err := l.Append(ctx, notRun); !errors.Is(err, ErrOwnerBudget) {
		t.Errorf("call.end of a call that did not run, of the spent uid: %v, want refused", err)
	}
	for _, r := range []*Record{rec(1000, KindCallEnd), rec(1000, KindSessionDelete), rec(1000, KindApprovalResolve), rec(1001, KindCallStart), rec(0, KindCallStart)} {
		if err := l.Append(ctx, r); err != nil {
			t.Errorf("%s of uid %d: %v", r.Kind, r.Caller.UID, err)
		}
	}
	// Ending work is never refused, but it spends the budget: a session's end, in debt, keeps
	// the next session's start out as its start would.
	fresh := rec(1002, KindCallStart)
	for range 7 {
		if err := l.Append(ctx, rec(1002, KindSessionDelete)); err != nil {
			t.Fatalf("session.delete refused: %v", err)
		}
	}
	if err := l.Append(ctx, fresh); !errors.Is(err, ErrOwnerBudget) {
		t.Errorf("a start after 7 session ends of about 8 KiB against a 64 KiB budget: %v, want refused", err)
	}
	// A subordinate uid of the spent user's range spends the same budget: a user's tens of
	// thousands of subordinate uids are not as many budgets.
	sub := rec(100007, KindCallStart)
	sub.Caller.RangeOwner = 1000
	if err := l.Append(ctx, sub); !errors.Is(err, ErrOwnerBudget) {
		t.Errorf("a subordinate uid of the spent user: %v, want refused", err)
	}
	// The daemon's records of what befell a user's session (no caller: the daemon wrote them)
	// are charged to its owner, never refused: suspensions whose reason quotes the user's
	// settings file, which the user can bring about at will.
	for range 7 {
		if err := l.Append(ctx, &Record{Kind: KindSessionSuspend, Owner: &Caller{UID: 1003}, Input: input}); err != nil {
			t.Fatalf("session.suspend refused: %v", err)
		}
	}
	if err := l.Append(ctx, rec(1003, KindCallStart)); !errors.Is(err, ErrOwnerBudget) {
		t.Errorf("a start after 7 suspensions of about 8 KiB against a 64 KiB budget: %v, want refused", err)
	}
}

// A volume whose free space cannot be read counts as short: the floor must not open on an
// unknown.
func TestUnreadableSpaceCountsAsLow(t *testing.T) {
	t.Parallel()
	// statfs fails: no such directory. No writer runs: refreshSpace alone is under test.
	l := &Log{cfg: Config{Dir: filepath.Join(t.TempDir(), "gone"), MinFreeBytes: 1}, log: zaptest.NewLogger(t)}
	l.refreshSpace()
	if !l.spaceLow.Load() {
		t.Fatal("free space unknown, and the log takes it as enough")
	}
}

// A write refused for want of space engages the free-space floor at once, not at the next
// periodic look: a smaller record may still fit and make the log healthy again, while the
// volume is full.
func TestNoSpaceWriteEngagesTheFloor(t *testing.T) {
	t.Parallel()
	l := &Log{cfg: Config{Dir: t.TempDir(), MinFreeBytes: 1 << 62}, log: zaptest.NewLogger(t)}
	l.spaceChecked.Store(time.Now().UnixNano()) // just looked: the rate limit would wait
	l.fail(nil, &os.PathError{Op: "write", Path: "audit.jsonl", Err: unix.ENOSPC})
	if !l.spaceLow.Load() {
		t.Fatal("ENOSPC from a write, and the floor still says there is room")
	}
}
