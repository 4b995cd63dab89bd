package api

import (
	"github.com/sandboxd/sandboxd/approval"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// The wire types are package protocol's, shared with the clients. The functions below turn
// the daemon's own types into them; wire_test.go checks that each keeps every JSON field of
// the type it stands for, so the bytes on the wire are what encoding the daemon's type gives.

func sessionView(s session.Snapshot) protocol.Session {
	return protocol.Session{
		ID: s.ID, Owner: protocol.Owner{UID: s.Owner.UID, GID: s.Owner.GID, User: s.Owner.User},
		ParentID: s.ParentID, Created: s.Created, Root: s.Root, Cwd: s.Cwd,
		AdditionalDirs: nonNil(s.AdditionalDirs), Mode: string(s.Mode),
		Rules: protocol.Rules(s.Rules), PersistCwd: s.PersistCwd, TrustProject: s.TrustProject, Network: s.Network,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func effectiveView(e permission.Effective) protocol.Effective {
	return protocol.Effective{
		DefaultMode: string(e.DefaultMode), AdditionalDirectories: e.AdditionalDirectories,
		DisableBypass: e.DisableBypass, DisableAuto: e.DisableAuto, ManagedRulesOnly: e.ManagedRulesOnly,
		Files: e.Files, Warnings: e.Warnings,
	}
}

func approvalsView(as []approval.Approval) []protocol.Approval {
	if as == nil {
		return nil
	}
	out := make([]protocol.Approval, len(as))
	for i, a := range as {
		out[i] = a.Approval
	}
	return out
}

func approvalEventView(ev approval.Event) protocol.ApprovalEvent {
	return protocol.ApprovalEvent{Type: ev.Type, Approval: ev.Approval.Approval, Resolution: ev.Resolution}
}

func errBody(code errcode.Code, msg string) protocol.ErrorBody {
	return protocol.ErrorBody{Error: protocol.ErrorDetail{Class: string(code), Message: msg}}
}
