package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/protocol"
	"github.com/sandboxd/sandboxd/session"
)

// auditFilter builds a filter from the query string. Callers who are not admins only ever
// see their own records, whatever they ask for.
func auditFilter(r *http.Request, c session.Caller) (audit.Filter, error) {
	q := r.URL.Query()
	f := audit.Filter{Session: q.Get("session"), User: q.Get("user"), Tool: q.Get("tool"), Behavior: q.Get("behavior")}
	if u := q.Get("uid"); u != "" {
		n, err := strconv.ParseUint(u, 10, 32)
		if err != nil {
			return f, errcode.Msg(errcode.BadRequest, "uid must be a number")
		}
		uid := uint32(n)
		f.UID = &uid
	}
	for _, k := range q["kind"] {
		for _, part := range strings.Split(k, ",") {
			kind := audit.Kind(strings.TrimSpace(part))
			if !kind.Known() {
				return f, errcode.New(errcode.BadRequest, fmt.Errorf("unknown record kind %q", part))
			}
			f.Kinds = append(f.Kinds, kind)
		}
	}
	for name, dst := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		if v := q.Get(name); v != "" {
			t, err := protocol.ParseTime(v)
			if err != nil {
				return f, errcode.New(errcode.BadRequest, fmt.Errorf("%s: %w", name, err))
			}
			*dst = t
		}
	}
	if !c.Admin {
		uid := c.UID
		f.UID = &uid
	}
	return f, nil
}

// errNoLongerAdmin ends an admin's stream whose caller lost the admin group meanwhile.
var errNoLongerAdmin = errors.New("no longer an admin")

// stillAdmin asks again whether r's caller is an admin, for a stream that outlives a reload.
func (s *Server) stillAdmin(r *http.Request) bool {
	peer, err := PeerFrom(r.Context())
	if err != nil {
		return false
	}
	c, err := s.backend.Identify(peer)
	return err == nil && c.Admin
}

// maxTail bounds tail=N: where the last N matching records are is held until the log is read.
const maxTail = 10000

// auditRecords streams matching records as JSON lines; with follow=1 it keeps streaming new
// ones until the client goes away; with tail=N only the last N matching records come first.
func (s *Server) auditRecords(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	f, err := auditFilter(r, c)
	if err != nil {
		return err
	}
	dir := s.backend.AuditDir()
	q := r.URL.Query()
	tail := -1
	if v := q.Get("tail"); v != "" {
		if tail, err = strconv.Atoi(v); err != nil || tail < 0 || tail > maxTail {
			return errcode.Msg(errcode.BadRequest, fmt.Sprintf("tail must be a number from 0 to %d (the records are held until the query ends); narrow the query with since, kind or session for more", maxTail))
		}
	}
	release, err := s.admitScan(r.Context(), c)
	if err != nil {
		return err
	}
	defer release()
	var ocsf bool
	switch q.Get("format") {
	case "", "jsonl":
	case "ocsf":
		ocsf = true
	default:
		return errcode.Msg(errcode.BadRequest, "format must be jsonl or ocsf")
	}
	host, _ := os.Hostname()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	emit := func(rec *audit.Record) error {
		if !ocsf {
			return enc.Encode(rec)
		}
		b, err := audit.OCSF(rec, host)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	flush := func() {
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	var lastSeq uint64
	records := audit.Query(dir, f)
	if tail >= 0 {
		// Only where the last records are is held while the log is read, then they are read
		// again: holding the records themselves took up to 650 MB for one query.
		refs, err := audit.TailRefs(dir, f, tail)
		if err != nil {
			_ = enc.Encode(errBody(errcode.Of(err), "reading the audit log: "+err.Error()))
			return nil
		}
		if len(refs) > 0 {
			lastSeq = refs[len(refs)-1].Seq
		}
		records = audit.ReadRefs(refs, f)
	}
	for rec, err := range records {
		if err != nil {
			_ = enc.Encode(errBody(errcode.Of(err), "reading the audit log: "+err.Error()))
			return nil
		}
		if err := emit(rec); err != nil {
			return nil
		}
		if tail < 0 {
			lastSeq = rec.Seq
		}
	}
	flush()
	if q.Get("follow") != "1" {
		return nil
	}
	// Tail starts at the newest file; skip what was already sent. Reading it again is a scan
	// like the query's, so the slot is held until Tail has caught up: following from then on
	// reads only what is appended.
	_ = audit.Tail(r.Context(), dir, f, true, release, func(rec *audit.Record) error {
		if rec.Seq <= lastSeq {
			return nil
		}
		if f.UID == nil && !s.stillAdmin(r) {
			// Every user's records were an admin's to follow; a reload took that away.
			_ = enc.Encode(errBody(errcode.PermissionDenied, "you are no longer an admin (the configuration was reloaded); follow your own records with a new request"))
			return errNoLongerAdmin
		}
		if err := emit(rec); err != nil {
			return err
		}
		flush()
		return nil
	})
	return nil
}

func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request, c session.Caller) error {
	if !c.Admin {
		return errcode.Msg(errcode.PermissionDenied, "verifying the whole log is for admins; verify a copy offline with sbctl audit verify --dir")
	}
	release, err := s.admitScan(r.Context(), c)
	if err != nil {
		return err
	}
	defer release()
	// A fresh signed head first, so the verify covers every record up to now.
	if err := s.backend.AuditCheckpoint(r.Context()); err != nil {
		return err
	}
	rep, err := audit.VerifyDir(s.backend.AuditDir(), s.backend.AuditPublicKey())
	out := protocol.AuditVerify{OK: err == nil}
	if rep != nil {
		out.Report = rep
	}
	if err != nil {
		out.Error = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) auditPubkey(w http.ResponseWriter, _ *http.Request, _ session.Caller) error {
	pub := s.backend.AuditPublicKey()
	writeJSON(w, http.StatusOK, protocol.AuditKey{KeyID: audit.KeyID(pub), PublicKey: strings.TrimSpace(string(audit.MarshalPublicKey(pub)))})
	return nil
}

// policy returns the policy in force to admins: custom Rego may say more about a fleet than
// its users should read.
func (s *Server) policy(w http.ResponseWriter, _ *http.Request, c session.Caller) error {
	if !c.Admin {
		return errcode.Msg(errcode.PermissionDenied, "the policy's modules are for admins (sbctl audit replay on the live log needs an admin)")
	}
	writeJSON(w, http.StatusOK, s.backend.Policy())
	return nil
}
