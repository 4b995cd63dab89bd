package protocol

import (
	"encoding/json"
	"time"
)

// Approval is one pending question as GET /v1/approvals shows it; the daemon's approval.Approval
// embeds it.
type Approval struct {
	ID string `json:"id"`
	// Session is the session whose call asks; ParentSession, when the ask bubbled up, the
	// session whose queue holds it (whose owner answers).
	Session       string `json:"session"`
	ParentSession string `json:"parent_session,omitempty"`
	// Owner is the uid that may answer (the queue session's owner; root may too).
	Owner uint32 `json:"owner_uid"`
	Tool  string `json:"tool"`
	// Input is the decided input, redacted like the audit log.
	Input  json.RawMessage `json:"input"`
	Reason string          `json:"reason"`
	// SuggestedRules would allow the call next time; remember adds them all (one per command
	// of a compound line that asked), or the one answer.rule names.
	SuggestedRules []string `json:"suggested_rules"`
	// Preview is what approving writes. A call that writes more than one file (sed -i on
	// several, or with a backup suffix) has them all in Previews, in the order approving
	// writes them; Preview is then the first.
	Preview  *Preview  `json:"preview,omitempty"`
	Previews []Preview `json:"previews,omitempty"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
}

// AllPreviews is every file approving a writes, in order; none when it has no preview.
func (a *Approval) AllPreviews() []Preview {
	switch {
	case len(a.Previews) > 0:
		return a.Previews
	case a.Preview != nil:
		return []Preview{*a.Preview}
	}
	return nil
}

// Preview is what an approved edit writes (approval.Preview, less the content itself).
type Preview struct {
	Path string `json:"path"`
	// Resolved is where Path leads, its symlinks followed, as the decision found it: the
	// approved write goes there or nowhere.
	Resolved string `json:"resolved,omitempty"`
	// Diff is a unified diff of the current file against the new content.
	Diff string `json:"diff"`
	// Exists says whether the file existed; SHA256 is its content's digest then.
	Exists bool   `json:"exists"`
	SHA256 string `json:"sha256,omitempty"`
	// NewSHA256 is the digest of the new content, so a UI can show what it approves.
	NewSHA256 string `json:"new_sha256"`
}

// Resolution is how an approval ended (approval.Resolution).
type Resolution struct {
	Answer string `json:"answer"` // Allow or Deny
	// Remember is the settings source the suggested rules were added to ("" for once).
	Remember string `json:"remember,omitempty"`
	// Rule is the first rule remembered; Rules all of them (one per command of a compound
	// line that asked).
	Rule    string   `json:"rule,omitempty"`
	Rules   []string `json:"rules,omitempty"`
	Message string   `json:"message,omitempty"`
	// By says who answered: "uid:N", "hook" or "expiry".
	By   string    `json:"by"`
	When time.Time `json:"when"`
}

// ApprovalEvent is one line of GET /v1/approvals/stream (approval.Event).
type ApprovalEvent struct {
	Type       string      `json:"type"` // created, answered, expired
	Approval   Approval    `json:"approval"`
	Resolution *Resolution `json:"resolution,omitempty"`
}

// ApprovalList is the body of GET /v1/approvals.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalAnswer is the body of POST /v1/approvals/{id}.
type ApprovalAnswer struct {
	Answer string `json:"answer"` // allow or deny
	// Remember adds the approval's suggested rules (or Rule, one of them) as allows
	// to session, localSettings or userSettings.
	Remember string `json:"remember,omitempty"`
	Rule     string `json:"rule,omitempty"`
	// Message goes back to the agent with a deny.
	Message string `json:"message,omitempty"`
}

// ApprovalAnswered is the response of POST /v1/approvals/{id}.
type ApprovalAnswered struct {
	Approval   Approval   `json:"approval"`
	Resolution Resolution `json:"resolution"`
}
