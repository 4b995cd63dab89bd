package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/protocol"
)

// curlAs sends one request over the daemon's socket as user u (so SO_PEERCRED names u) and
// returns the status and the body. With out set, the body goes to that file instead, so a
// large response does not grow this process (whose memory the test measures).
func curlAs(t *testing.T, td *testDaemon, u testutil.User, method, path, body, out string) (int, []byte) {
	t.Helper()
	dst := out
	if dst == "" {
		dst = "-"
	}
	cmd := exec.Command("curl", "-sS", "--unix-socket", td.socket, "-X", method, "-H", "Content-Type: application/json",
		"--data-binary", "@-", "-o", dst, "-w", "\n%{http_code}", "http://sandboxd"+path)
	cmd.Stdin = strings.NewReader(body)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
	cmd.Dir = u.Home
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %s %s as %s: %v", method, path, u.Name, err)
	}
	i := bytes.LastIndexByte(b, '\n')
	code, _ := strconv.Atoi(string(b[i+1:]))
	return code, b[:i]
}

func sessionAs(t *testing.T, td *testDaemon, u testutil.User, extra string) string {
	t.Helper()
	code, b := curlAs(t, td, u, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q%s}`, u.Home, extra), "")
	if code != http.StatusCreated {
		t.Fatalf("create session as %s: %d %s", u.Name, code, b)
	}
	var s protocol.Session
	decodeInto(t, b, &s)
	return s.ID
}

func errClass(b []byte) string {
	var e protocol.ErrorBody
	_ = json.Unmarshal(b, &e)
	return e.Error.Class
}

// procKB reads a field of /proc/self/status in KiB.
func procKB(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// The first attack: a batch of Reads of big images. The daemon runs in this process,
// so its memory is this process's: the peak (VmHWM, reset first) may grow by at most 512 MiB.
func TestHostileImageBatch(t *testing.T) {
	// A burst for two batches of 64 at once: the memory bound is what is tried here, and the
	// rate counts each call of a batch (TestRateCountsEachCallOfABatch).
	td := startDaemon(t, "limits:\n  requests_burst_per_user: 200\n")
	mallory := testutil.CreateUser(t, "sbhm")
	id := sessionAs(t, td, mallory, "")
	mkImage := func(name string, size int) string {
		b := make([]byte, size)
		_, _ = rand.Read(b)
		copy(b, "\x89PNG\r\n\x1a\n")
		p := filepath.Join(mallory.Home, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_ = os.Chown(p, int(mallory.UID), int(mallory.GID))
		return p
	}
	fits := mkImage("fits.png", 3500<<10)
	big := mkImage("big.png", 6<<20)

	t.Run("image over the cap refused", func(t *testing.T) {
		code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+id+"/calls", fmt.Sprintf(`{"tool":"Read","input":{"file_path":%q}}`, big), "")
		var res protocol.CallResult
		decodeInto(t, b, &res)
		if code != http.StatusOK || res.Error == nil || res.Error.Class != "too_large" || !strings.Contains(res.Error.Message, "smaller copy") {
			t.Fatalf("6 MB image: %d %s", code, b)
		}
	})
	t.Run("batch over batch_calls refused", func(t *testing.T) {
		calls := strings.TrimSuffix(strings.Repeat(`{"tool":"Glob","input":{"pattern":"*"}},`, 65), ",")
		code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+id+"/batch", `{"calls":[`+calls+`]}`, "")
		if code != http.StatusBadRequest || !strings.Contains(string(b), "limits.batch_calls") {
			t.Fatalf("65 calls: %d %s", code, b)
		}
	})
	t.Run("batch of big images bounded", func(t *testing.T) {
		one := fmt.Sprintf(`{"tool":"Read","input":{"file_path":%q}},`, fits)
		body := `{"calls":[` + strings.TrimSuffix(strings.Repeat(one, 64), ",") + `]}`
		runtime.GC()
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Fatalf("reset the peak RSS: %v", err)
		}
		base := procKB(t, "VmRSS")
		out := filepath.Join(mallory.Home, "batch.json") // curl runs as mallory
		start := time.Now()
		var wg sync.WaitGroup
		codes := make([]int, 2)
		// Two at once, as a hostile tenant would: they share the user's response budget.
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], _ = curlAs(t, td, mallory, "POST", "/v1/sessions/"+id+"/batch", body, fmt.Sprintf("%s.%d", out, i))
			}()
		}
		wg.Wait()
		peak := procKB(t, "VmHWM")
		growth := (peak - base) >> 10
		t.Logf("2 batches of 64 Reads of a 3.4 MiB image: daemon RSS %d MiB -> peak %d MiB (growth %d MiB) in %v",
			base>>10, peak>>10, growth, time.Since(start).Round(time.Millisecond))
		for i, code := range codes {
			fi, _ := os.Stat(fmt.Sprintf("%s.%d", out, i))
			t.Logf("response %d: %d, %d MiB", i, code, fi.Size()>>20)
			if code != http.StatusOK {
				t.Fatalf("batch %d: %d", i, code)
			}
			if fi.Size() > 80<<20 {
				t.Errorf("response %d is %d MiB, more than response_bytes (64 MiB) allows", i, fi.Size()>>20)
			}
		}
		if bound := int64(512 * raceMemFactor); growth > bound {
			t.Errorf("daemon RSS grew by %d MiB, more than %d", growth, bound)
		}
		b, _ := os.ReadFile(out + ".0")
		var br protocol.BatchResponse
		decodeInto(t, b, &br)
		images, left, unread := 0, 0, 0
		for _, r := range br.Results {
			for _, bl := range r.Content {
				if bl.Type == "image" {
					images++
				}
				if strings.Contains(bl.Text, "limits.response_bytes") {
					left++
				}
				if strings.Contains(bl.Text, "this response has room for") {
					unread++
				}
			}
		}
		t.Logf("response 0: %d images inline, %d left out with a note, %d of them before they were read", images, left, unread)
		if len(br.Results) != 64 || left == 0 || images == 0 {
			t.Errorf("want 64 results, some images inline and the rest left out with a note: %d results, %d images, %d notes", len(br.Results), images, left)
		}
		// Once the budget is spent, the rest are left out before the worker reads them: the
		// daemon does not read and encode images only to drop them.
		if unread == 0 {
			t.Error("no image was left out before it was read")
		}
	})
}

// Concurrency over calls_per_user: the excess gets 429 too_many_calls while another user is
// served; the rate limit likewise.
func TestHostileConcurrencyAndRate(t *testing.T) {
	td, mallory, alice, mid, aid := twoTenants(t, "limits:\n  calls_per_user: 2\n  requests_per_second_per_user: 2\n  requests_burst_per_user: 6\n", "sbh")
	slow := `{"tool":"Bash","input":{"command":"sleep 3"}}`

	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", slow, ""); code != http.StatusOK {
				t.Errorf("slow call within the limit: %d %s", code, b)
			}
		}()
	}
	time.Sleep(time.Second) // both are running
	code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", `{"tool":"Bash","input":{"command":"true"}}`, "")
	if code != http.StatusTooManyRequests || errClass(b) != "too_many_calls" || !strings.Contains(string(b), "limits.calls_per_user") {
		t.Errorf("third call: %d %s", code, b)
	}
	// Making a session compiles its settings as a call's decision does: it takes a slot too.
	code, b = curlAs(t, td, mallory, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q}`, mallory.Home), "")
	if code != http.StatusTooManyRequests || errClass(b) != "too_many_calls" {
		t.Errorf("a session made at the limit: %d %s", code, b)
	}
	start := time.Now()
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/calls", `{"tool":"Bash","input":{"command":"echo hi"}}`, ""); code != http.StatusOK {
		t.Errorf("the other user while mallory is at its limit: %d %s", code, b)
	}
	t.Logf("the other user's call while mallory is at its limit: %v", time.Since(start).Round(time.Millisecond))
	wg.Wait()

	// The bucket: 6 at once, then 2 a second. Mallory has spent 3; a burst of 10 runs dry.
	limited := 0
	for range 10 {
		code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/decide", `{"tool":"Bash","input":{"command":"ls"}}`, "")
		if code == http.StatusTooManyRequests {
			if errClass(b) != "rate_limited" {
				t.Errorf("429 with class %s: %s", errClass(b), b)
			}
			limited++
		}
	}
	if limited == 0 {
		t.Error("10 decides at once past a burst of 6: none rate limited")
	}
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/decide", `{"tool":"Bash","input":{"command":"ls"}}`, ""); code != http.StatusOK {
		t.Errorf("the other user while mallory is rate limited: %d %s", code, b)
	}
	// Each refusal is counted by class and the limit it named.
	_, m := td.do(t, "GET", "/v1/metrics", "")
	for _, want := range []string{
		`sandboxd_limit_refusals_total{code="too_many_calls",limit="calls_per_user"} 2`,
		fmt.Sprintf(`sandboxd_limit_refusals_total{code="rate_limited",limit="requests_per_second_per_user"} %d`, limited),
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(string(m), "sandboxd_limit_refusals_total"))
		}
	}
}

// The rate limit is of calls, not of requests: a batch takes a token for each call it holds,
// so batches cannot carry a user past limits.requests_per_second_per_user.
func TestRateCountsEachCallOfABatch(t *testing.T) {
	// A burst of 5: making the session took one.
	td, mallory, alice, mid, aid := twoTenants(t, "limits:\n  requests_per_second_per_user: 0.5\n  requests_burst_per_user: 5\n", "sbr")
	batch := `{"calls":[` + strings.Repeat(`{"tool":"Bash","input":{"command":"true"}},`, 3) + `{"tool":"Bash","input":{"command":"true"}}]}`
	if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/batch", batch, ""); code != http.StatusOK {
		t.Fatalf("a batch of 4 within the 4 tokens left: %d %s", code, b)
	}
	// The burst is spent: one request of four calls more is refused as a whole, and so is a
	// single call (one token in a second at most has come back since).
	code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/batch", batch, "")
	if code != http.StatusTooManyRequests || errClass(b) != "rate_limited" || !strings.Contains(string(b), "a batch counts each of its calls") {
		t.Errorf("a second batch of 4 right after a burst of 4: %d %s", code, b)
	}
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/batch", batch, ""); code != http.StatusOK {
		t.Errorf("the other user's batch while mallory is rate limited: %d %s", code, b)
	}
}

// A request's body pays for its size (a token per 8 KiB past the first 8): a user's big
// commands cost the daemon in proportion, so they count against the rate in proportion.
func TestRateCountsBigBodies(t *testing.T) {
	td, mallory, alice, mid, aid := twoTenants(t, "limits:\n  requests_per_second_per_user: 0.5\n  requests_burst_per_user: 20\n", "sbz")
	big := fmt.Sprintf(`{"tool":"Bash","input":{"command":"echo %s"}}`, strings.Repeat("x", 100<<10))
	if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/decide", big, ""); code != http.StatusOK {
		t.Fatalf("a 100 KiB decide within a burst of 20: %d %.300s", code, b)
	}
	// 14 of the 20 tokens are spent (one made the session): a second one is refused, a small
	// one still passes.
	code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/decide", big, "")
	if code != http.StatusTooManyRequests || errClass(b) != "rate_limited" || !strings.Contains(string(b), "a body each 8 KiB past its first") {
		t.Errorf("a second 100 KiB decide right after: %d %.300s", code, b)
	}
	if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/decide", `{"tool":"Bash","input":{"command":"true"}}`, ""); code != http.StatusOK {
		t.Errorf("a small decide with tokens left: %d %.300s", code, b)
	}
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/decide", big, ""); code != http.StatusOK {
		t.Errorf("the other user's big decide while mallory is rate limited: %d %.300s", code, b)
	}
	// A report goes to the audit log whole, and a session's rules into its record: they pay
	// for their size as calls do.
	report := fmt.Sprintf(`{"tool":"Bash","event":"PostToolUse","input":{"command":"echo %s"}}`, strings.Repeat("x", 100<<10))
	if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/reports", report, ""); code != http.StatusTooManyRequests || errClass(b) != "rate_limited" {
		t.Errorf("a 100 KiB report with a few tokens left: %d %.300s", code, b)
	}
	rules := fmt.Sprintf(`{"cwd":%q,"rules":{"deny":["Bash(echo %s)"]}}`, mallory.Home, strings.Repeat("x", 100<<10))
	if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions", rules, ""); code != http.StatusTooManyRequests || errClass(b) != "rate_limited" {
		t.Errorf("a session with 100 KiB of rules, a few tokens left: %d %.300s", code, b)
	}
}

// twoTenants starts a daemon on config and makes two throwaway users, named from prefix,
// each with a bypassPermissions session: mallory, who attacks, and alice, who must still be
// served.
func twoTenants(t *testing.T, config, prefix string) (td *testDaemon, mallory, alice testutil.User, mid, aid string) {
	t.Helper()
	td = startDaemon(t, config)
	mallory, alice = testutil.CreateUser(t, prefix+"m"), testutil.CreateUser(t, prefix+"a")
	mid = sessionAs(t, td, mallory, `,"mode":"bypassPermissions"`)
	aid = sessionAs(t, td, alice, `,"mode":"bypassPermissions"`)
	return td, mallory, alice, mid, aid
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Persisted results of one user stay within persisted_bytes_per_user.
func TestHostilePersistedBytes(t *testing.T) {
	td := startDaemon(t, "limits:\n  persisted_bytes_per_user: 1048576\n")
	mallory := testutil.CreateUser(t, "sbhp")
	id := sessionAs(t, td, mallory, `,"mode":"bypassPermissions"`)
	for i := range 4 {
		cmd := fmt.Sprintf(`{"tool":"Bash","input":{"command":"yes %c | head -c 400000"}}`, 'a'+i)
		code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+id+"/calls", cmd, "")
		if code != http.StatusOK || !strings.Contains(string(b), "persisted-output") {
			t.Fatalf("large output %d: %d %.300s", i, code, b)
		}
	}
	if got := td.d.core.host.PersistedBytes(mallory.UID); got > 1<<20 {
		t.Errorf("mallory holds %d persisted bytes, more than 1 MiB", got)
	}
	var onDisk int64
	files, _ := filepath.Glob(filepath.Join(td.d.core.host.ResultsDir(id), "*"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			onDisk += fi.Size()
		}
	}
	t.Logf("after 4 outputs of 400 kB: %d files, %d bytes on disk", len(files), onDisk)
	if onDisk > 1<<20 {
		t.Errorf("%d bytes on disk, more than 1 MiB", onDisk)
	}
	code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+id+"/calls", `{"tool":"Bash","input":{"command":"yes q | head -c 2000000"}}`, "")
	if code != http.StatusOK || !strings.Contains(string(b), "persisted_bytes_per_user") {
		t.Errorf("an output larger than the limit: %d %.500s", code, b)
	}
}

// A saved output is named by its content's hash, in a dir named by the session's id, which
// other users may learn (ps shows sbctl's arguments): they must not reach the file at all,
// where stat would tell its size and time, or confirm a guessed output.
func TestHostileResultsOutOfOthersReach(t *testing.T) {
	td, mallory, alice, _, aid := twoTenants(t, "", "sbro")
	code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/calls", `{"tool":"Bash","input":{"command":"yes a | head -c 400000"}}`, "")
	m := regexp.MustCompile(`saved to: ([^\s\\]+)`).FindSubmatch(b)
	if code != http.StatusOK || m == nil {
		t.Fatalf("large output: %d %.300s", code, b)
	}
	saved := string(m[1])
	as := func(u testutil.User, name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if err := as(alice, "head", "-c", "10", saved); err != nil {
		t.Errorf("the owner cannot read its saved output: %v", err)
	}
	if err := as(mallory, "stat", saved); err == nil {
		t.Errorf("another user can stat %s", saved)
	}
	// Nor find the dir by the session's id, whose times would tell when outputs were saved.
	if strings.Contains(saved, aid) {
		t.Errorf("the results dir is named by the session's id: %s", saved)
	}
}

// Output still being written counts too: three background commands printing 600 kB each and
// still running, under a 1 MiB limit, leave at most the limit (and one reservation step) on
// the state disk, not 1.8 MB.
func TestHostileInflightSpills(t *testing.T) {
	td := startDaemon(t, "limits:\n  persisted_bytes_per_user: 1048576\n")
	mallory := testutil.CreateUser(t, "sbhi")
	id := sessionAs(t, td, mallory, `,"mode":"bypassPermissions"`)
	for i := range 3 {
		cmd := fmt.Sprintf(`{"tool":"Bash","input":{"command":"yes %c | head -c 600000; sleep 60","run_in_background":true}}`, 'a'+i)
		if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+id+"/calls", cmd, ""); code != http.StatusOK {
			t.Fatalf("background command %d: %d %.300s", i, code, b)
		}
	}
	onDisk := func() int64 {
		var n int64
		files, _ := filepath.Glob(filepath.Join(td.d.core.host.ResultsDir(id), "*"))
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	// Wait until the outputs stop growing: each command prints at once, then sleeps.
	last := int64(-1)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		n := onDisk()
		if n == last && n > 0 {
			break
		}
		last = n
	}
	if n := onDisk(); n > 1<<20+256<<10 {
		t.Errorf("three running commands' output takes %d bytes on the state disk, past the 1 MiB limit", n)
	} else if n < 600000 {
		t.Errorf("%d bytes spilled: the first command's output was not kept", n)
	}
}

// An audit flood: large inputs and many records cannot push out another user's first record,
// and the chain still verifies.
func TestHostileAuditFlood(t *testing.T) {
	td := startDaemon(t, "audit:\n  max_file_bytes: 65536\n  retain_files: 1\n  max_input_bytes: 1024\nlimits:\n  requests_per_second_per_user: 10000\n  requests_burst_per_user: 10000\n")
	mallory := testutil.CreateUser(t, "sbhf")
	alice := testutil.CreateUser(t, "sbhv")
	aid := sessionAs(t, td, alice, "")
	mid := sessionAs(t, td, mallory, "")
	if code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/decide", `{"tool":"Bash","input":{"command":"echo alice-first"}}`, ""); code != http.StatusOK {
		t.Fatalf("alice: %d %s", code, b)
	}
	big := strings.Repeat("x", 200<<10)
	body := fmt.Sprintf(`{"tool":"Write","input":{"file_path":%q,"content":%q}}`, filepath.Join(mallory.Home, "f.txt"), big)
	for i := range 150 {
		if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/decide", body, ""); code != http.StatusOK {
			t.Fatalf("flood %d: %d %.300s", i, code, b)
		}
	}
	dir := td.d.audit.Dir()
	if err := td.d.audit.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	files, _ := audit.ListFiles(dir)
	var size int64
	for _, f := range files {
		fi, _ := os.Stat(f)
		size += fi.Size()
	}
	t.Logf("after a flood of 150 x 200 KiB inputs: %d audit files, %d KiB", len(files), size>>10)
	if size > 1<<20 {
		t.Errorf("the flood stored %d KiB of audit log: inputs are not capped", size>>10)
	}
	if len(files) < 2 {
		t.Errorf("the flood did not rotate the log (%d file): retention was not exercised", len(files))
	}
	rep, err := audit.VerifyDir(dir, td.d.audit.PublicKey())
	if err != nil {
		t.Fatalf("audit verify after the flood: %v", err)
	}
	if rep.Pruned {
		t.Errorf("retention pruned young records: %+v", rep)
	}
	found := false
	for _, r := range auditRecords(t, td) {
		if r.Caller != nil && r.Caller.UID == alice.UID && strings.Contains(string(r.Input), "alice-first") {
			found = true
		}
		if r.Caller != nil && r.Caller.UID == mallory.UID && r.Kind == audit.KindCallDecide && !strings.Contains(string(r.Input), `"truncated":true`) {
			t.Errorf("a flood record kept its whole input: %.200s", r.Input)
		}
	}
	if !found {
		t.Error("alice's first record is gone after mallory's flood")
	}
}

// When the audit volume is short of space, calls are refused with 503 audit_unavailable.
func TestAuditLowSpaceRefusesCalls(t *testing.T) {
	td := startDaemon(t, "audit:\n  min_free_bytes: 4611686018427387904\n")
	u := testutil.CreateUser(t, "sbhs")
	code, b := curlAs(t, td, u, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q}`, u.Home), "")
	if code != http.StatusServiceUnavailable || errClass(b) != "audit_unavailable" {
		t.Fatalf("session on a full audit volume: %d %s", code, b)
	}
}

// Sessions idle past sessions.idle_timeout_sec end, with an audit record saying why.
func TestIdleSessionsExpire(t *testing.T) {
	td := startDaemon(t, "")
	u := testutil.CreateUser(t, "sbhi")
	id := sessionAs(t, td, u, "")
	if n := td.d.core.expireIdle(context.Background(), time.Now()); n != 0 {
		t.Fatalf("a fresh session expired")
	}
	if n := td.d.core.expireIdle(context.Background(), time.Now().Add(25*time.Hour)); n != 1 {
		t.Fatalf("expired %d sessions, want 1", n)
	}
	if code, _ := curlAs(t, td, u, "GET", "/v1/sessions/"+id, "", ""); code != http.StatusNotFound {
		t.Errorf("expired session still there: %d", code)
	}
	found := false
	for _, r := range auditRecords(t, td) {
		if r.Kind == audit.KindSessionDelete && r.Session == id && r.Detail["reason"] == "idle_timeout" {
			found = true
		}
	}
	if !found {
		t.Error("no session.delete record with reason idle_timeout")
	}
}

// A session's calls get its creator's umask, read from /proc; 022 when it cannot be read.
func TestProcessUmask(t *testing.T) {
	cmd := exec.Command("sh", "-c", "umask 027; exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if string(comm) == "sleep\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if got := processUmask(int32(cmd.Process.Pid)); got != 0o027 {
		t.Errorf("umask of a process that set 027: %#o", got)
	}
	for _, pid := range []int32{0, -1, 1 << 30} {
		if got := processUmask(pid); got != defaultUmask {
			t.Errorf("pid %d: %#o, want the default %#o", pid, got, defaultUmask)
		}
	}
}

// TestRulesPerSession: the rules a session's owner controls are bounded (each is checked on
// every call, so thousands of them made each call cost the daemon tens of milliseconds),
// counting the project's settings file with the request's.
func TestRulesPerSession(t *testing.T) {
	td := startDaemon(t, "limits:\n  rules_per_session: 20\n")
	dir := t.TempDir()
	rules := func(n int) string {
		rs := make([]string, n)
		for i := range rs {
			rs[i] = fmt.Sprintf("%q", fmt.Sprintf("Read(//var/tmp/nothing-%d)", i))
		}
		return "[" + strings.Join(rs, ",") + "]"
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"rules":{"deny":%s}}`, dir, rules(20)))
	code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"rules":{"deny":%s}}`, dir, rules(21)))
	if code != 422 || !strings.Contains(string(b), "limits.rules_per_session (20)") {
		t.Errorf("21 rules: %d %s, want 422 naming limits.rules_per_session", code, b)
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+s.ID, fmt.Sprintf(`{"rules":{"deny":%s}}`, rules(21))); code != 422 || !strings.Contains(string(b), "rules_per_session") {
		t.Errorf("an update to 21 rules: %d %s, want 422", code, b)
	}
	// The project's settings count too: 5 there and 16 in the request are 21.
	if err := os.MkdirAll(filepath.Join(dir, ".sandboxd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".sandboxd", "settings.json"), []byte(fmt.Sprintf(`{"permissions":{"deny":%s}}`, rules(5))), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"rules":{"deny":%s}}`, dir, rules(16))); code != 422 {
		t.Errorf("16 rules and 5 in the project's settings: %d %s, want 422", code, b)
	}
	td.newSession(t, fmt.Sprintf(`{"cwd":%q,"rules":{"deny":%s}}`, dir, rules(15)))
	// Their text is bounded too: 19 rules of 3.6 KB in the project's settings file hold over
	// 64 KiB (the count is fine), and 15 of them do not.
	long := func(n int) []byte {
		rs := make([]string, n)
		for i := range rs {
			rs[i] = fmt.Sprintf("%q", "Read(//var/tmp/"+strings.Repeat("x", 3600)+fmt.Sprint(i)+")")
		}
		return []byte(`{"permissions":{"deny":[` + strings.Join(rs, ",") + `]}}`)
	}
	settings := filepath.Join(dir, ".sandboxd", "settings.json")
	if err := os.WriteFile(settings, long(19), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q}`, dir)); code != 422 || !strings.Contains(string(b), "bytes") {
		t.Errorf("19 rules of 3.6 KB: %d %s, want 422 naming their size", code, b)
	}
	if err := os.WriteFile(settings, long(15), 0o644); err != nil {
		t.Fatal(err)
	}
	td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
}

// TestDirsPerSession: a session's additional directories are bounded (each is mounted in every
// call: 500 of them cost the daemon 58 ms a call), at creation and on update.
func TestDirsPerSession(t *testing.T) {
	td := startDaemon(t, "limits:\n  dirs_per_session: 3\n")
	dir := t.TempDir()
	dirs := func(n int) string {
		ds := make([]string, n)
		for i := range ds {
			d := filepath.Join(dir, fmt.Sprintf("d%d", i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			ds[i] = fmt.Sprintf("%q", d)
		}
		return "[" + strings.Join(ds, ",") + "]"
	}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"additional_dirs":%s}`, dir, dirs(3)))
	code, b := td.do(t, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q,"additional_dirs":%s}`, dir, dirs(4)))
	if code != 422 || !strings.Contains(string(b), "limits.dirs_per_session (3)") {
		t.Errorf("4 directories: %d %s, want 422 naming limits.dirs_per_session", code, b)
	}
	if code, b := td.do(t, "PATCH", "/v1/sessions/"+s.ID, fmt.Sprintf(`{"additional_dirs":%s}`, dirs(4))); code != 422 || !strings.Contains(string(b), "dirs_per_session") {
		t.Errorf("an update to 4 directories: %d %s, want 422", code, b)
	}
}

// TestAuditQueryOnePerUser: an audit query reads every retained file, so one uid may have one
// reading the log at a time: while mallory's is held (her client reads slowly), her next is
// refused with 429 and alice's is served; once hers ends she may query again. A tail past
// 10 000 records is refused, since they are held until the log is read.
func TestAuditQueryOnePerUser(t *testing.T) {
	td, mallory, alice, mid, _ := twoTenants(t, "limits:\n  requests_per_second_per_user: 10000\n  requests_burst_per_user: 10000\n", "sbaq")
	// Enough of mallory's records (60 KB inputs) that a slow reader holds the query mid-log.
	body := fmt.Sprintf(`{"tool":"Write","input":{"file_path":%q,"content":%q}}`, filepath.Join(mallory.Home, "f.txt"), strings.Repeat("x", 60<<10))
	for i := range 60 {
		if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/decide", body, ""); code != http.StatusOK {
			t.Fatalf("decide %d: %d %.300s", i, code, b)
		}
	}
	slow := exec.Command("curl", "-sS", "--limit-rate", "2k", "--unix-socket", td.socket, "-o", "/dev/null", "http://sandboxd/v1/audit/records")
	slow.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: mallory.UID, Gid: mallory.GID}}
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Process.Kill() }()
	// Let the slow query be admitted first: a probe that came first would have it refused.
	exited := make(chan struct{})
	go func() { _, _ = slow.Process.Wait(); close(exited) }()
	select {
	case <-exited:
		t.Fatal("the slow query ended at once")
	case <-time.After(2 * time.Second):
	}
	held := false
	for deadline := time.Now().Add(20 * time.Second); !held && time.Now().Before(deadline); {
		code, b := curlAs(t, td, mallory, "GET", "/v1/audit/records?kind=session.create", "", "")
		held = code == http.StatusTooManyRequests && strings.Contains(string(b), "one may run at a time per user")
	}
	if !held {
		t.Fatal("mallory's second audit query was never refused while her first was reading")
	}
	if code, b := curlAs(t, td, alice, "GET", "/v1/audit/records?kind=session.create", "", ""); code != http.StatusOK || !strings.Contains(string(b), "session.create") {
		t.Errorf("alice's query while mallory's runs: %d %.300s", code, b)
	}
	_ = slow.Process.Kill()
	<-exited
	freed := false
	for deadline := time.Now().Add(20 * time.Second); !freed && time.Now().Before(deadline); {
		code, _ := curlAs(t, td, mallory, "GET", "/v1/audit/records?kind=session.create", "", "")
		freed = code == http.StatusOK
	}
	if !freed {
		t.Error("mallory could not query again after her first query ended")
	}
	if code, b := curlAs(t, td, mallory, "GET", "/v1/audit/records?tail=10001", "", ""); code != http.StatusBadRequest || !strings.Contains(string(b), "from 0 to 10000") {
		t.Errorf("tail=10001: %d %.300s", code, b)
	}
}

// TestSessionChangesPaced: making and changing sessions takes the caller's rate like a call (a
// session costs the daemon a network namespace, its directories checked and its settings read),
// so a loop of them is refused with 429 past the burst.
func TestSessionChangesPaced(t *testing.T) {
	td := startDaemon(t, "limits:\n  requests_per_second_per_user: 0.01\n  requests_burst_per_user: 3\n")
	u := testutil.CreateUser(t, "sbsp")
	id := sessionAs(t, td, u, "")
	if code, b := curlAs(t, td, u, "PATCH", "/v1/sessions/"+id, `{"mode":"plan"}`, ""); code != http.StatusOK {
		t.Fatalf("update within the burst: %d %s", code, b)
	}
	sessionAs(t, td, u, "")
	if code, b := curlAs(t, td, u, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q}`, u.Home), ""); code != http.StatusTooManyRequests || errClass(b) != "rate_limited" {
		t.Errorf("a fourth change past the burst of 3: %d %s", code, b)
	}
	if code, b := curlAs(t, td, u, "PATCH", "/v1/sessions/"+id, `{"mode":"default"}`, ""); code != http.StatusTooManyRequests || errClass(b) != "rate_limited" {
		t.Errorf("an update past the burst: %d %s", code, b)
	}
}

// An update's additional dirs are checked as the owner, as a new session's are: one that does
// not exist, or that only another user can enter, is refused, and the session keeps its dirs.
func TestUpdateDirsCheckedAsOwner(t *testing.T) {
	td, mallory, alice, mid, _ := twoTenants(t, "", "sbud")
	private := filepath.Join(alice.Home, "private")
	if err := os.MkdirAll(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(private, int(alice.UID), int(alice.GID)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{private, filepath.Join(mallory.Home, "nosuch")} {
		code, b := curlAs(t, td, mallory, "PATCH", "/v1/sessions/"+mid, fmt.Sprintf(`{"additional_dirs":[%q]}`, d), "")
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "not usable by uid") {
			t.Errorf("an update adding %s: %d %.300s, want 422 not usable", d, code, b)
		}
	}
	code, b := curlAs(t, td, mallory, "GET", "/v1/sessions/"+mid, "", "")
	if code != http.StatusOK || strings.Contains(string(b), "private") || strings.Contains(string(b), "nosuch") {
		t.Errorf("the session after refused updates: %d %.300s", code, b)
	}
	ok := filepath.Join(mallory.Home, "more")
	if err := os.MkdirAll(ok, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ok, int(mallory.UID), int(mallory.GID)); err != nil {
		t.Fatal(err)
	}
	if code, b := curlAs(t, td, mallory, "PATCH", "/v1/sessions/"+mid, fmt.Sprintf(`{"additional_dirs":[%q]}`, ok), ""); code != http.StatusOK {
		t.Errorf("an update adding the owner's own dir: %d %.300s", code, b)
	}
}

// One user's saved results cannot fill the state volume the audit log shares: they stop at
// twice audit.min_free_bytes (the output is cut with a note), so the audit log keeps its room
// and another user's calls still run.
func TestPersistedResultsLeaveTheAuditRoom(t *testing.T) {
	td := startDaemonWith(t, "audit:\n  min_free_bytes: 4194304\n", func(state string) {
		if err := os.Mkdir(state, 0o711); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m,mode=0711", "tmpfs", state).CombinedOutput(); err != nil {
			t.Skipf("cannot mount a tmpfs for the state dir: %v %s", err, out)
		}
		// Cleanups run last-in first-out: after the daemon's stop, before the dir's removal.
		t.Cleanup(func() { _ = exec.Command("umount", "-l", state).Run() })
	})
	mallory, alice := testutil.CreateUser(t, "sbvm"), testutil.CreateUser(t, "sbva")
	mid := sessionAs(t, td, mallory, `,"mode":"bypassPermissions"`)
	aid := sessionAs(t, td, alice, `,"mode":"bypassPermissions"`)
	cut := false
	for i := range 8 {
		cmd := fmt.Sprintf(`{"tool":"Bash","input":{"command":"yes %c | head -c 3000000"}}`, 'a'+i)
		code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", cmd, "")
		if code != http.StatusOK {
			t.Fatalf("mallory's output %d: %d %.300s", i, code, b)
		}
		if strings.Contains(string(b), "could not be saved (ENOSPC)") {
			cut = true
		}
	}
	if !cut {
		t.Error("24 MB of output on a 24 MiB state volume were all saved")
	}
	code, b := curlAs(t, td, alice, "POST", "/v1/sessions/"+aid+"/calls", `{"tool":"Bash","input":{"command":"echo served"}}`, "")
	if code != http.StatusOK || !strings.Contains(string(b), "served") {
		t.Errorf("alice, after mallory's outputs: %d %.500s", code, b)
	}
}

// A call refused before its tool is found (an unknown tool) is still its caller's record: it
// names the caller and session, so the caller's own query shows it, an admin sees who sent it,
// and the caller's audit budget counts it.
func TestUnknownToolRecordsAreTheCallers(t *testing.T) {
	td := startDaemon(t, "")
	mallory := testutil.CreateUser(t, "sbut")
	mid := sessionAs(t, td, mallory, "")
	code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", `{"tool":"NoSuchTool","input":{}}`, "")
	if code != http.StatusNotFound || errClass(b) != "unknown_tool" {
		t.Fatalf("unknown tool: %d %.300s", code, b)
	}
	n := 0
	for _, r := range auditRecords(t, td) {
		if r.Tool != "NoSuchTool" {
			continue
		}
		n++
		if r.Caller == nil || r.Caller.UID != mallory.UID || r.Session != mid {
			t.Errorf("an unknown tool's %s record does not name its caller and session: caller %+v session %q", r.Kind, r.Caller, r.Session)
		}
	}
	if n == 0 {
		t.Fatal("no record of the unknown-tool call")
	}
	code, b = curlAs(t, td, mallory, "GET", "/v1/audit/records?tool=NoSuchTool", "", "")
	if code != http.StatusOK || !bytes.Contains(b, []byte(`"NoSuchTool"`)) {
		t.Errorf("the caller's own query does not show their unknown-tool call: %d %.300s", code, b)
	}
}

// A caller past their audit budget cannot go on adding records with calls that do not run: the
// end of an unknown tool's call (or of any call refused before it ran) is charged like new
// work, so a flood of them stops at the budget instead of filling the volume for everyone.
func TestAuditBudgetCountsCallsThatDidNotRun(t *testing.T) {
	td := startDaemon(t, "audit:\n  max_bytes_per_user_hour: 65536\nlimits:\n  requests_per_second_per_user: 10000\n  requests_burst_per_user: 10000\n")
	mallory := testutil.CreateUser(t, "sbub")
	mid := sessionAs(t, td, mallory, "")
	body := fmt.Sprintf(`{"tool":"NoSuchTool","input":{"x":%q}}`, strings.Repeat("y", 8<<10))
	refusedAt := -1
	for i := range 64 {
		code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", body, "")
		if code == http.StatusNotFound && errClass(b) == "unknown_tool" {
			continue
		}
		// The user's own budget, as the docs say: 429 rate_limited, not the log's failure.
		if code != http.StatusTooManyRequests || errClass(b) != "rate_limited" {
			t.Fatalf("call %d: %d %.300s", i, code, b)
		}
		refusedAt = i
		break
	}
	if refusedAt < 0 {
		t.Fatal("64 unknown-tool calls of 8 KiB each all went into a 64 KiB hourly audit budget")
	}
	if code, b := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", body, ""); code != http.StatusTooManyRequests || errClass(b) != "rate_limited" {
		t.Errorf("the next call past the budget: %d %.300s", code, b)
	}
	var stored int
	for _, r := range auditRecords(t, td) {
		if r.Caller != nil && r.Caller.UID == mallory.UID && r.Tool == "NoSuchTool" {
			stored += len(r.Input)
		}
	}
	if stored > 80<<10 {
		t.Errorf("mallory's unknown-tool calls stored %d KiB past a 64 KiB budget", stored>>10)
	}
}

// A user may map its subordinate uids (/etc/subuid) into a user namespace, and connect as any
// of them: each would otherwise be a tenant of its own, with a full set of limits (enough of
// them hold every descriptor the daemon has). Their requests, sessions, calls and records
// count against the range's owner; they run in its user cgroup; none is an admin.
func TestSubordinateUidsCountAsTheirOwner(t *testing.T) {
	owner := testutil.CreateUser(t, "sbsu")
	td := startDaemon(t, "admin_group: "+owner.Name+"\nlimits:\n  sessions_per_user: 2\n  connections_per_user: 3\n")
	first := uint32(3_000_000_000) + uint32(os.Getpid()%4096)*65536
	span := fmt.Sprintf("%d-%d", first, first+65535)
	if out, err := exec.Command("usermod", "--add-subuids", span, owner.Name).CombinedOutput(); err != nil {
		t.Fatalf("usermod --add-subuids: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("usermod", "--del-subuids", span, owner.Name).Run() })
	sub := func(n uint32) testutil.User {
		u := testutil.User{Name: fmt.Sprint("subordinate ", n), UID: first + n, GID: first + n, Home: t.TempDir()}
		if err := os.Chown(u.Home, int(u.UID), int(u.GID)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(u.Home), 0o755); err != nil {
			t.Fatal(err)
		}
		return u
	}
	s7, s8 := sub(7), sub(8)
	// The identities cache names for 30 s: the range is in place before either is seen.
	sessionAs(t, td, owner, `,"mode":"bypassPermissions"`)
	sid := sessionAs(t, td, s7, `,"mode":"bypassPermissions"`)
	for _, u := range []testutil.User{s7, s8, owner} {
		code, b := curlAs(t, td, u, "POST", "/v1/sessions", fmt.Sprintf(`{"cwd":%q}`, u.Home), "")
		if code != http.StatusConflict || !strings.Contains(string(b), fmt.Sprintf("uid %d", owner.UID)) {
			t.Errorf("a third session, as %s, with 2 per user: %d %s", u.Name, code, b)
		}
	}
	// The call runs as the subordinate uid, in the owner's user cgroup.
	code, b := curlAs(t, td, s7, "POST", "/v1/sessions/"+sid+"/calls", `{"tool":"Bash","input":{"command":"id -u; cat /proc/self/cgroup"}}`, "")
	if code != http.StatusOK || !strings.Contains(string(b), fmt.Sprint(s7.UID)) || !strings.Contains(string(b), fmt.Sprintf("user-%d/", owner.UID)) || strings.Contains(string(b), fmt.Sprintf("user-%d/", s7.UID)) {
		t.Errorf("a call of a subordinate uid: %d %s", code, b)
	}
	// Its records name the owner.
	_, recs := td.do(t, "GET", "/v1/audit/records?kind=session.create&session="+sid, "")
	if !strings.Contains(string(recs), fmt.Sprintf(`"range_owner":%d`, owner.UID)) {
		t.Errorf("session.create of a subordinate uid: %s", recs)
	}
	// The owner's group, mapped into the namespace, makes the owner an admin, not its uids.
	metrics := func(u testutil.User) int {
		cmd := exec.Command("curl", "-sS", "--unix-socket", td.socket, "-o", "/dev/null", "-w", "%{http_code}", "http://sandboxd/v1/metrics")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: []uint32{owner.GID}}}
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(out))
		return n
	}
	if code := metrics(owner); code != http.StatusOK {
		t.Errorf("metrics as the admin group's member: %d", code)
	}
	if code := metrics(s7); code != http.StatusForbidden {
		t.Errorf("metrics as a subordinate uid holding the admin group: %d, want 403", code)
	}
	// Connections: the owner holds 2 and a subordinate uid 1 of the owner's 3; the next, from
	// another subordinate uid, is over the cap. A stream refused because the daemon had not yet
	// counted an earlier request's connection closed ends at once: it is opened again.
	for _, u := range []testutil.User{owner, owner, s7} {
		for try := 0; ; try++ {
			cmd := exec.Command("curl", "-sSN", "--unix-socket", td.socket, "http://sandboxd/v1/approvals/stream")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			ended := make(chan struct{})
			go func() { _ = cmd.Wait(); close(ended) }()
			t.Cleanup(func() { _ = cmd.Process.Kill(); <-ended })
			select {
			case <-ended:
				if try == 5 {
					t.Fatalf("a stream as %s ends at once, again and again", u.Name)
				}
				continue
			case <-time.After(1500 * time.Millisecond):
			}
			break
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, b := curlAs(t, td, s8, "GET", "/v1/healthz", "", "")
		if code == http.StatusTooManyRequests && strings.Contains(string(b), fmt.Sprintf("uid %d (for its subordinate uid %d)", owner.UID, s8.UID)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a fourth connection of the owner's range: %d %s", code, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A session change the log refuses (here past its owner's audit budget) does not apply: no
// later call may be decided by a mode or rule that no record gave the session.
func TestRefusedSessionChangeDoesNotApply(t *testing.T) {
	td := startDaemon(t, "audit:\n  max_bytes_per_user_hour: 65536\nlimits:\n  requests_per_second_per_user: 10000\n  requests_burst_per_user: 10000\n")
	mallory := testutil.CreateUser(t, "sbsc")
	mid := sessionAs(t, td, mallory, "")
	body := fmt.Sprintf(`{"tool":"NoSuchTool","input":{"x":%q}}`, strings.Repeat("y", 8<<10))
	for i := 0; ; i++ {
		code, _ := curlAs(t, td, mallory, "POST", "/v1/sessions/"+mid+"/calls", body, "")
		if code == http.StatusTooManyRequests {
			break
		}
		if i == 64 {
			t.Fatal("the audit budget never ran out")
		}
	}
	// Deny rules enough that its record cannot fit in what is left of the budget.
	var deny []string
	for i := range 16 {
		deny = append(deny, fmt.Sprintf("Read(//srv/%d/%s)", i, strings.Repeat("d", 1000)))
	}
	change, _ := json.Marshal(map[string]any{"mode": "bypassPermissions", "rules": map[string]any{"allow": []string{"Bash(*)"}, "deny": deny}})
	code, b := curlAs(t, td, mallory, "PATCH", "/v1/sessions/"+mid, string(change), "")
	if code != http.StatusTooManyRequests {
		t.Fatalf("a change past the budget: %d %.300s", code, b)
	}
	code, b = curlAs(t, td, mallory, "GET", "/v1/sessions/"+mid, "", "")
	if code != http.StatusOK || !strings.Contains(string(b), `"mode":"default"`) || strings.Contains(string(b), "Bash(*)") {
		t.Errorf("the refused change applied: %d %s", code, b)
	}
	for _, r := range auditRecords(t, td) {
		if r.Session == mid && r.Kind == "session.update" {
			t.Errorf("a refused change was recorded: %+v", r)
		}
	}
}
