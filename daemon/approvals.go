package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/config"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// The settings sources an answer may remember a rule in: never an admin's.
const (
	rememberSession = "session"
	rememberLocal   = "localSettings"
	rememberUser    = "userSettings"
)

// maxAnswerMessage bounds a deny's message. It is held with the answered approval until its
// call takes it or it expires, and written whole into the approval.resolve record, neither of
// which the owner's bounds count (approval.MaxPendingBytesPerOwner,
// audit.max_bytes_per_user_hour): unbounded, each ask a user answered themselves carried a
// body's worth (max_request_bytes) of their text, 256 of them 600 MB of the daemon's memory
// and 64 KiB a record of the log. It is a reason for the agent, and the agents' own cap a
// hook's reason at 9 000 characters.
const maxAnswerMessage = 4096

// approvalSweepInterval is how often pending approvals are checked for expiry.
const approvalSweepInterval = time.Second

// seesApproval: the owner who answers and root see an approval; admins see every one.
func seesApproval(caller session.Caller, a approval.Approval) bool {
	return caller.Admin || caller.UID == 0 || caller.UID == a.Owner
}

// answersApproval: only the owner of the session whose queue holds it, and root.
func answersApproval(caller session.Caller, a approval.Approval) bool {
	return caller.UID == 0 || caller.UID == a.Owner
}

// approvalFor is a as caller is shown it. Who answers it sees all of it, its input as it runs
// rather than as redacted for the log (AsAsked); an admin who only
// sees it gets its previews without their diffs (paths and digests stay): a diff holds lines of
// the file as it is, which the daemon read as the session's owner, and a file its owner may
// read is not one an admin may (a Write over a 0600 file showed all of it as removed lines).
// The audit log, which admins read, keeps the same digests and no diff.
func approvalFor(caller session.Caller, a approval.Approval) approval.Approval {
	if answersApproval(caller, a) {
		if a.AsAsked != nil {
			a.Input, a.AsAsked = a.AsAsked, nil
		}
		return a
	}
	a.AsAsked = nil
	// The reason and the suggested rules may quote the call's words (a rule's text, a path):
	// redacted as its input is, as the audit log redacts them.
	a.Reason = audit.RedactString(a.Reason)
	rules := make([]string, len(a.SuggestedRules))
	for i, r := range a.SuggestedRules {
		rules[i] = audit.RedactString(r)
	}
	a.SuggestedRules = rules
	if a.Preview != nil {
		pv := *a.Preview
		pv.Diff = ""
		a.Preview = &pv
	}
	if len(a.Previews) > 0 {
		pvs := make([]protocol.Preview, len(a.Previews))
		for i, pv := range a.Previews {
			pv.Diff = ""
			pvs[i] = pv
		}
		a.Previews = pvs
	}
	a.PreviewContents = nil
	return a
}

// Approvals implements api.Backend: the caller's pending approvals (all for admins), each as
// approvalFor shows it to the caller.
func (c *Core) Approvals(caller session.Caller) []approval.Approval {
	list := c.approvals.Pending(func(a approval.Approval) bool { return seesApproval(caller, a) })
	for i := range list {
		list[i] = approvalFor(caller, list[i])
	}
	return list
}

// SubscribeApprovals implements api.Backend. A stream lasts: whether its caller is an admin is
// asked again for each event, so a reload that takes the admin group away (or names another)
// stops an open `approvals --watch` showing other users' calls.
func (c *Core) SubscribeApprovals(caller session.Caller) (*approval.Sub, func()) {
	now := func() session.Caller {
		cur := caller
		cur.Admin = caller.UID == 0 || c.ids.inAdminGroup(caller)
		return cur
	}
	return c.approvals.Subscribe(func(a approval.Approval) bool { return seesApproval(now(), a) },
		func(a approval.Approval) approval.Approval { return approvalFor(now(), a) })
}

// AnswerApproval implements api.Backend. A remembered rule is written (and the session's
// rules rebuilt) before the answer takes effect, and the answer is audited before it does:
// a waiting call runs only after both.
func (c *Core) AnswerApproval(ctx context.Context, caller session.Caller, id string, ans protocol.ApprovalAnswer) (approval.Approval, approval.Resolution, error) {
	a, res, ok := c.approvals.Get(id)
	if !ok || !seesApproval(caller, a) {
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.NotFound, fmt.Errorf("approval %q not found", id))
	}
	if !answersApproval(caller, a) {
		return approval.Approval{}, approval.Resolution{}, errcode.Msg(errcode.PermissionDenied, "admins see approvals; only the session's owner (or root) answers them")
	}
	if res != nil {
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.Conflict, fmt.Errorf("approval %s was already answered (%s by %s)", id, res.Answer, res.By))
	}
	if len(ans.Message) > maxAnswerMessage {
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.Validation, fmt.Errorf("message may be at most %d bytes, not %d: it is a reason for the agent", maxAnswerMessage, len(ans.Message)))
	}
	r := approval.Resolution{Answer: approval.Answer(ans.Answer), Message: ans.Message, By: "uid:" + strconv.FormatUint(uint64(caller.UID), 10), When: time.Now().UTC()}
	switch r.Answer {
	case approval.Allow, approval.Deny:
	default:
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.Validation, fmt.Errorf(`answer must be "allow" or "deny", not %q`, ans.Answer))
	}
	// Claimed before anything is remembered or audited: of concurrent answers (and the
	// expiry) one goes on, the others are refused here and leave no record.
	if _, err := c.approvals.Claim(id, func(x approval.Approval) bool { return answersApproval(caller, x) }); err != nil {
		if errors.Is(err, approval.ErrAnswered) {
			return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.Conflict, fmt.Errorf("approval %s was answered meanwhile", id))
		}
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.NotFound, fmt.Errorf("approval %q not found", id))
	}
	resolved := false
	defer func() {
		if !resolved {
			c.approvals.Unclaim(id)
		}
	}()
	var inForce func() error
	var undo func()
	if ans.Remember != "" {
		if r.Answer != approval.Allow {
			return approval.Approval{}, approval.Resolution{}, errcode.Msg(errcode.Validation, "remember goes with allow: a deny is not remembered")
		}
		if len(a.SuggestedRules) == 0 {
			return approval.Approval{}, approval.Resolution{}, errcode.Msg(errcode.Validation, "this approval suggests no rule to remember; allow it once")
		}
		// Every suggested rule: a compound line suggests one per command that asked, and
		// remembering the first alone asked again for the same line.
		rules := a.SuggestedRules
		if ans.Rule != "" {
			if !slices.Contains(a.SuggestedRules, ans.Rule) {
				return approval.Approval{}, approval.Resolution{}, errcode.Msg(errcode.Validation, "rule must be one of the approval's suggested_rules")
			}
			rules = []string{ans.Rule}
		}
		var err error
		if inForce, undo, err = c.remember(ctx, caller, a, ans.Remember, rules); err != nil {
			return approval.Approval{}, approval.Resolution{}, err
		}
		r.Remember, r.Rule, r.Rules = ans.Remember, rules[0], rules
	}
	if err := c.recorder.approvalResolve(ctx, caller, a, r); err != nil {
		if undo != nil {
			undo()
		}
		return approval.Approval{}, approval.Resolution{}, err
	}
	var loadErr error
	if inForce != nil {
		// Only once the answer is recorded: no call is allowed by a remembered rule whose
		// approval the log does not hold.
		loadErr = inForce()
	}
	got, err := c.approvals.Resolve(id, r, func(x approval.Approval) bool { return answersApproval(caller, x) })
	resolved = err == nil
	switch {
	case errors.Is(err, approval.ErrAnswered):
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.Conflict, fmt.Errorf("approval %s was answered meanwhile", id))
	case err != nil:
		return approval.Approval{}, approval.Resolution{}, errcode.New(errcode.NotFound, fmt.Errorf("approval %q not found", id))
	case loadErr != nil:
		return approval.Approval{}, approval.Resolution{}, fmt.Errorf("approved, and %s remembered in %s, but the session's rules did not load again: %w", strings.Join(r.Rules, ", "), r.Remember, loadErr)
	}
	return approvalFor(caller, got), r, nil
}

// remember adds rules as allows to the asking session's own rules (recorded and in force at
// once, as an owner's change), or to its project's local settings or its owner's user
// settings, written as the owner: those are put in force by inForce, once the answer is
// recorded, and undo takes them out of the file again when it cannot be.
func (c *Core) remember(ctx context.Context, caller session.Caller, a approval.Approval, source string, rules []string) (inForce func() error, undo func(), err error) {
	s, err := c.store.Get(session.Caller{UID: 0}, a.Session)
	if err != nil {
		return nil, nil, errcode.New(errcode.NotFound, fmt.Errorf("the approval's session %s is gone", a.Session))
	}
	switch source {
	case rememberSession:
		own := s.Snapshot().Rules
		for _, rule := range rules {
			if !slices.Contains(own.Allow, rule) {
				own.Allow = append(own.Allow, rule)
			}
		}
		// The PATCH path: the same checks, rebuild and audit as an owner's change.
		_, err := c.UpdateSession(ctx, caller, s.ID, session.Update{Rules: &own})
		return nil, nil, err
	case rememberLocal, rememberUser:
		if source == rememberLocal && !s.TrustProject {
			return nil, nil, errcode.Msg(errcode.Validation, "remember localSettings needs a session created with trust_project: an untrusted project's files may deny and ask, never allow; use session or userSettings")
		}
		base, file := s.Root, filepath.Join(s.Root, ".sandboxd", "settings.local.json")
		if source == rememberUser {
			if s.Owner.Home == "" || s.Owner.Home == "/" {
				return nil, nil, errcode.Msg(errcode.Validation, "the session's owner has no home for userSettings")
			}
			base, file = s.Owner.Home, filepath.Join(s.Owner.Home, ".config", "sandboxd", "settings.json")
		}
		var added []string
		if err := c.host.UpdateSettingsAs(ctx, s, base, file, func(old []byte) ([]byte, error) {
			b, add, err := addAllowRules(old, rules)
			added = add
			return b, err
		}); err != nil {
			return nil, nil, errcode.New(errcode.Of(err), fmt.Errorf("remember %s in %s: %w", strings.Join(rules, ", "), source, err))
		}
		inForce = func() error {
			s.RulesMu.Lock()
			defer s.RulesMu.Unlock()
			ctx, cancel := context.WithTimeout(ctx, ownerPaced)
			defer cancel()
			rs, err := c.loadRules(ctx, s, s.Snapshot().Rules)
			if err != nil {
				return err
			}
			return c.setRuleSet(ctx, s, rs)
		}
		undo = func() {
			if len(added) == 0 {
				return
			}
			if err := c.host.UpdateSettingsAs(context.WithoutCancel(ctx), s, base, file, func(cur []byte) ([]byte, error) { return dropAllowRules(cur, added) }); err != nil {
				c.log.Warn("take back remembered rules whose approval could not be recorded", zap.String("file", file), zap.Strings("rules", added), zap.Error(err))
			}
		}
		return inForce, undo, nil
	}
	return nil, nil, errcode.New(errcode.Validation, fmt.Errorf(`remember must be "session", "localSettings" or "userSettings", not %q`, source))
}

// addAllowRules adds rules to permissions.allow of a settings file, keeping everything else,
// and returns the ones it added (not there before).
func addAllowRules(old []byte, rules []string) ([]byte, []string, error) {
	var added []string
	b, err := editAllow(old, func(allow []any) []any {
		for _, rule := range rules {
			if !slices.Contains(allow, any(rule)) {
				allow = append(allow, rule)
				added = append(added, rule)
			}
		}
		return allow
	})
	return b, added, err
}

// dropAllowRules takes rules out of permissions.allow of a settings file again.
func dropAllowRules(cur []byte, rules []string) ([]byte, error) {
	return editAllow(cur, func(allow []any) []any {
		return slices.DeleteFunc(allow, func(r any) bool { s, ok := r.(string); return ok && slices.Contains(rules, s) })
	})
}

// editAllow changes permissions.allow of a settings file with edit, keeping everything else;
// the file is left as it was when edit changes nothing.
func editAllow(old []byte, edit func([]any) []any) ([]byte, error) {
	doc := map[string]any{}
	if len(old) > 0 {
		if err := json.Unmarshal(old, &doc); err != nil {
			return nil, errcode.New(errcode.Validation, fmt.Errorf("the settings file is not a JSON object, so it was left alone: %w", err))
		}
	}
	perms, _ := doc["permissions"].(map[string]any)
	if perms == nil {
		perms = map[string]any{}
	}
	allow, _ := perms["allow"].([]any)
	n := len(allow)
	allow = edit(slices.Clone(allow))
	if len(allow) == n {
		return old, nil
	}
	perms["allow"] = allow
	doc["permissions"] = perms
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// expireApprovals denies the approvals past their time, each audited before it is resolved
// (as an answer is), so the record is in the log before the call waiting on it returns.
// A denial the log could not take still happens: nobody's answer never becomes an allow.
func (c *Core) expireApprovals(ctx context.Context, now time.Time) {
	for _, a := range c.approvals.Expired(now) {
		if _, err := c.approvals.Claim(a.ID, nil); err != nil {
			continue // answered (or being answered) meanwhile: that answer is the one audited
		}
		r := approval.ExpiryDenial(a)
		r.When = now.UTC()
		if err := c.recorder.approvalResolve(ctx, session.Caller{}, a, r); err != nil {
			c.log.Error("audit approval expiry", zap.Error(err))
		}
		_, _ = c.approvals.Resolve(a.ID, r, nil)
	}
}

// dropApprovals denies the unanswered approvals of a session that ended and audits each denial
// as an answer, by caller (nobody's for an idle timeout): the log holds how every approval it
// asked for ended, not only the session's end.
func (c *Core) dropApprovals(ctx context.Context, caller session.Caller, id string, r approval.Resolution) {
	r.When = time.Now().UTC()
	for _, a := range c.approvals.DropSession(id, r) {
		if err := c.recorder.approvalResolve(ctx, caller, a, r); err != nil {
			c.log.Error("audit approval dropped with its session", zap.Error(err))
		}
	}
}

// approvalTTL is approvals.timeout_sec in force.
func (c *Core) approvalTTL() time.Duration { return config.Duration(c.Config().Approvals.TimeoutSec) }

// approvalResolve records an answer (by a person, a hook or expiry).
func (r *recorder) approvalResolve(ctx context.Context, caller session.Caller, a approval.Approval, res approval.Resolution) error {
	detail := approvalDetail(&a, &res)
	rec := &audit.Record{Kind: audit.KindApprovalResolve, Session: a.Session, Tool: a.Tool, Detail: detail,
		// Charged to the approval's owner whoever ended it (expiry, a session dropped).
		Owner: &audit.Caller{UID: a.Owner, RangeOwner: tenantOf(a)}}
	if res.By != "expiry" && res.By != "idle_timeout" {
		rec.Caller = auditCaller(caller)
	}
	if err := r.log.Append(ctx, rec); err != nil {
		return errcode.Audit(err)
	}
	return nil
}

// approvalDetail is what an approval record keeps: id, sessions, rules, answer and who.
func approvalDetail(a *approval.Approval, res *approval.Resolution) map[string]string {
	d := map[string]string{}
	if a != nil {
		d["approval_id"] = a.ID
		d["owner_uid"] = strconv.FormatUint(uint64(a.Owner), 10)
		if a.ParentSession != "" {
			d["parent_session"] = a.ParentSession
		}
		if b, err := json.Marshal(a.SuggestedRules); err == nil {
			d["suggested_rules"] = string(b)
		}
		d["expires"] = a.Expires.Format(time.RFC3339)
		if a.Preview != nil {
			d["preview_path"] = a.Preview.Path
			d["preview_sha256"] = a.Preview.SHA256
			d["preview_new_sha256"] = a.Preview.NewSHA256
		}
		if len(a.Previews) > 1 {
			// Every file, by digest: the diffs stay in the approval, not in the log.
			files := make([]map[string]string, len(a.Previews))
			for i, pv := range a.Previews {
				files[i] = map[string]string{"path": pv.Path, "sha256": pv.SHA256, "new_sha256": pv.NewSHA256}
			}
			if b, err := json.Marshal(files); err == nil {
				d["previews"] = string(b)
			}
		}
	}
	if res != nil {
		d["answer"] = string(res.Answer)
		d["by"] = res.By
		if res.Rule != "" {
			d["remembered_rule"] = res.Rule
			d["remembered_in"] = res.Remember
		}
		if len(res.Rules) > 1 {
			if b, err := json.Marshal(res.Rules); err == nil {
				d["remembered_rules"] = string(b)
			}
		}
		if res.Message != "" {
			d["message"] = res.Message
		}
	}
	return d
}

// tenantOf is the range owner of an approval's owner, 0 when it is its own.
func tenantOf(a approval.Approval) uint32 {
	if a.Tenant != 0 && a.Tenant != a.Owner {
		return a.Tenant
	}
	return 0
}
