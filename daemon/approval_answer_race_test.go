package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
)

// TestConcurrentAnswersAuditOne: of answers given to one approval at once, one takes effect
// and the log holds that one alone: a losing answer (here as often a deny as an allow) leaves
// no approval.resolve record to contradict it.
func TestConcurrentAnswersAuditOne(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q}`, dir))
	for round := range 3 {
		res := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":"touch %s"}`, filepath.Join(dir, fmt.Sprint("f", round))), ""))
		if behavior(res) != permission.Ask || res.ApprovalID == "" {
			t.Fatalf("want an ask: %+v", res)
		}
		const n = 8
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := []string{}
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answer := []string{"allow", "deny"}[i%2]
				code, b := td.answer(t, res.ApprovalID, fmt.Sprintf(`{"answer":%q}`, answer))
				switch code {
				case http.StatusOK:
					mu.Lock()
					won = append(won, answer)
					mu.Unlock()
				case http.StatusConflict:
				default:
					t.Errorf("answer: %d %s", code, b)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("answers taken: %v, want one", won)
		}
		code, b := td.do(t, "GET", "/v1/audit/records?kind=approval.resolve", "")
		if code != http.StatusOK {
			t.Fatalf("audit: %d %s", code, b)
		}
		var recorded []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct {
				Detail map[string]string `json:"detail"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Detail["approval_id"] == res.ApprovalID {
				recorded = append(recorded, rec.Detail["answer"])
			}
		}
		if len(recorded) != 1 || recorded[0] != won[0] {
			t.Fatalf("approval.resolve records of %s: %v; the answer that took effect: %s", res.ApprovalID, recorded, won[0])
		}
	}
}
