package daemon

import (
	"encoding/json"
	"strconv"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/replay"
)

// basisDetail puts into a call's last record what its policy decision was made from, so
// `sbctl audit replay` can decide it again: the policy digest, the rule set (in full the first
// time this daemon records it for this uid, by digest after), the facts beside the input, and
// the policy's own decision when a route (approval, classifier, parent) changed it.
func (r *recorder) basisDetail(detail map[string]string, uid uint32, policy, final *permission.Decision) {
	b := policy.Basis
	detail[replay.DetailPolicyDigest] = b.PolicyDigest
	detail[replay.DetailRulesDigest] = b.Rules.Digest()
	// A value the log would cut (audit.max_input_bytes) is left out and its size said
	// instead: cut JSON decides nothing, and a replay counts such a call as not replayable.
	max := r.log.MaxDetailBytes()
	fits := func(js []byte) bool { return max <= 0 || len(js) <= max }
	if r.rules.first(uid, b.Rules.Digest(), r.log.Rotations()) {
		if js, err := json.Marshal(replay.RulesOf(b.Rules)); err == nil && fits(js) {
			detail[replay.DetailRules] = string(js)
		} else if err == nil {
			detail[replay.DetailRulesOmitted] = strconv.Itoa(len(js))
		}
	}
	if js, err := json.Marshal(replay.FactsOf(b.Facts)); err == nil {
		if red := audit.RedactMarshaled(js); fits(red) {
			detail[replay.DetailFacts] = string(red)
		} else {
			detail[replay.DetailFactsOmitted] = strconv.Itoa(len(red))
		}
	}
	if final == nil || final.Behavior != policy.Behavior || final.Rule != policy.Rule {
		js, _ := json.Marshal(auditDecision(policy))
		detail[replay.DetailPolicyDecision] = string(js)
	}
}

// recordedRules is the set of (uid, rules digest) written in full in the current log file.
// It starts over on rotation (retention removes whole files); past maxRecordedRules the least
// recently used go, which only means a rule set is written again. Keyed by uid too, so each
// user's own records (all a non-admin may query) hold their rules.
type recordedRules struct {
	mu   sync.Mutex
	gen  uint64
	seen *lru.Cache[recordedKey, struct{}]
}

type recordedKey struct {
	uid    uint32
	digest string
}

const maxRecordedRules = 4096

func (s *recordedRules) first(uid uint32, digest string, gen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen, _ = lru.New[recordedKey, struct{}](maxRecordedRules)
	}
	if gen != s.gen {
		s.gen = gen
		s.seen.Purge()
	}
	k := recordedKey{uid, digest}
	if s.seen.Contains(k) {
		return false
	}
	s.seen.Add(k, struct{}{})
	return true
}
