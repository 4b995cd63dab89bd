package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// Each protocol type that stands for a daemon type must have exactly its JSON fields, of the
// same kinds: a field added to the daemon's type and not to protocol's would silently drop
// out of the wire.
func TestWireTypesMatchDaemonTypes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		wire     any
		daemon   any
		complete bool // every daemon field is on the wire too
	}{
		{"Effective", protocol.Effective{}, permission.Effective{}, true},
		{"VerifyReport", protocol.VerifyReport{}, audit.VerifyReport{}, true},
		// A client reads only part of a record; the daemon sends audit.Record's lines whole.
		{"Record", protocol.Record{}, audit.Record{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testutil.SameJSONFields(t, tc.name, tc.wire, tc.daemon, tc.complete)
		})
	}
	if protocol.Allow != string(permission.Allow) || protocol.Deny != string(permission.Deny) || protocol.Ask != string(permission.Ask) {
		t.Error("behavior names differ from permission's")
	}
	if protocol.Allow != string(approval.Allow) || protocol.Deny != string(approval.Deny) {
		t.Error("answer names differ from approval's")
	}
}

// The conversions give the bytes that encoding the daemon's types gave, and a preview's content
// never goes on the wire.
func TestWireBytesUnchanged(t *testing.T) {
	t.Parallel()
	when := time.Date(2025, 3, 4, 5, 6, 7, 890, time.UTC)
	pv := &protocol.Preview{Path: "/p", Diff: "-a\n+b", Exists: true, SHA256: "s1", NewSHA256: "s2"}
	ap := approval.Approval{Approval: protocol.Approval{ID: "ap1", Session: "s", ParentSession: "p", Owner: 1000, Tool: "Edit", Input: json.RawMessage(`{"a":1}`), Reason: "r", SuggestedRules: []string{"Edit(/p)"}, Preview: pv, Created: when, Expires: when.Add(time.Minute)},
		PreviewContents: [][]byte{[]byte("secret content")}}
	bare := approval.Approval{Approval: protocol.Approval{ID: "ap2"}}
	res := approval.Resolution{Answer: approval.Allow, Remember: "session", Rule: "Edit(/p)", Message: "m", By: "uid:0", When: when}
	rep := &audit.VerifyReport{Files: []string{"a.jsonl"}, Records: 3, FirstSeq: 1, LastSeq: 3, LastHash: "h", Checkpoints: 1, HeadSeq: 3, Signed: true, BadLine: 2, Reason: "x"}
	eff := permission.Effective{DefaultMode: permission.ModeDefault, AdditionalDirectories: []string{"/d"}, DisableBypass: true, ManagedRulesOnly: true, Files: []string{"f"}, Warnings: []string{"w"}}

	type pair struct{ old, new any }
	cases := map[string]pair{}
	for name, l := range map[string][]approval.Approval{"nil": nil, "empty": {}, "two": {ap, bare}} {
		cases["approvals/"+name] = pair{struct {
			Approvals []approval.Approval `json:"approvals"`
		}{l}, protocol.ApprovalList{Approvals: approvalsView(l)}}
	}
	cases["answered"] = pair{struct {
		Approval   approval.Approval   `json:"approval"`
		Resolution approval.Resolution `json:"resolution"`
	}{ap, res}, protocol.ApprovalAnswered{Approval: ap.Approval, Resolution: res}}
	cases["event/created"] = pair{approval.Event{Type: "created", Approval: bare}, approvalEventView(approval.Event{Type: "created", Approval: bare})}
	answered := approval.Event{Type: "answered", Approval: ap, Resolution: &res}
	cases["event/answered"] = pair{answered, approvalEventView(answered)}
	type legacyVerify struct {
		OK     bool                `json:"ok"`
		Error  string              `json:"error,omitempty"`
		Report *audit.VerifyReport `json:"report"`
	}
	cases["verify"] = pair{legacyVerify{OK: true, Report: rep}, protocol.AuditVerify{OK: true, Report: (*protocol.VerifyReport)(rep)}}
	cases["verify/nil"] = pair{legacyVerify{Error: "e"}, protocol.AuditVerify{Error: "e"}}
	for name, e := range map[string]permission.Effective{"full": eff, "zero": {}} {
		cases["effective/"+name] = pair{e, effectiveView(e)}
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			old, err := json.Marshal(tc.old)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tc.new)
			if err != nil {
				t.Fatal(err)
			}
			if string(old) != string(got) {
				t.Errorf("wire bytes changed:\nold %s\nnew %s", old, got)
			}
			if strings.Contains(string(got), "secret content") || strings.Contains(string(got), "c2VjcmV0IGNvbnRlbnQ") {
				t.Errorf("a preview's content went on the wire: %s", got)
			}
		})
	}
}
