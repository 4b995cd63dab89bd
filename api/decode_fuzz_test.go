package api

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/protocol"
)

// FuzzDecodeRequest feeds arbitrary bodies to the request decoder: it never panics, every
// failure is a typed bad_request (or the size limit), and what decodes is checked cleanly.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"tool":"Bash","input":{"command":"ls"}}`,
		`{"tool":"Read","input":{"file_path":"/x"},"tool_use_id":"t1","mode":"plan"}`,
		`{"calls":[{"tool":"Read","input":{}}]}`, `{"calls":[{},{"tool":"x"}]}`, `{"calls":null}`,
		`{"tool":"Bash","input":{"command":"ls"}} trailing`,
		`{"tool":1}`, `[]`, `null`, ``, `{"tool":"Bash","bogus":1}`, "{\"tool\":\"\u0000\"}",
		`{"tool":"Bash","mode":"yolo"}`, `{"tool":"Bash","shell":"zsh"}`, `{"tool":"Bash","shell":"/bin/zsh"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, target := range []any{&protocol.CallRequest{}, &protocol.BatchRequest{}, &protocol.CreateSession{}, &protocol.UpdateSession{}} {
			req := httptest.NewRequest(http.MethodPost, "/v1/x", bytes.NewReader(body))
			req.Body = http.MaxBytesReader(httptest.NewRecorder(), req.Body, 1<<16)
			err := decode(req, target)
			if err != nil {
				var mbe *http.MaxBytesError
				if code := errcode.Of(err); code != errcode.BadRequest && !errors.As(err, &mbe) {
					t.Fatalf("decode error %v has class %s, want bad_request", err, code)
				}
				continue
			}
			if br, ok := target.(*protocol.BatchRequest); ok {
				// What the batch decoder takes, call by call, the whole-body decoder reads alike.
				req := httptest.NewRequest(http.MethodPost, "/v1/x", bytes.NewReader(body))
				calls, err := decodeBatch(req, 64)
				if err != nil {
					if code := errcode.Of(err); code != errcode.BadRequest {
						t.Fatalf("decodeBatch error %v has class %s, want bad_request", err, code)
					}
				} else if len(calls) != len(br.Calls) || len(calls) > 0 && !reflect.DeepEqual(calls, br.Calls) {
					t.Fatalf("decodeBatch read %+v where decode read %+v", calls, br.Calls)
				}
			}
			if cr, ok := target.(*protocol.CallRequest); ok {
				for _, decideOnly := range []bool{false, true} {
					if err := checkCall(*cr, decideOnly); err == nil {
						if strings.TrimSpace(cr.Tool) == "" || cr.WaitMS < 0 || !decideOnly && cr.Shell != "" && cr.Shell != "bash" ||
							len(cr.Shell) > 32 || strings.ContainsAny(cr.Shell, "/ \x00\n") {
							t.Fatalf("checkCall (decide only %v) let through %+v", decideOnly, cr)
						}
					} else if c := errcode.Of(err); c != errcode.BadRequest && c != errcode.Validation {
						t.Fatalf("checkCall error class %s", c)
					}
				}
			}
		}
	})
}
