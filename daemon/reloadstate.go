package daemon

import (
	"fmt"
	"sync/atomic"
	"time"
)

// reloadState is how the last attempt to load the configuration, and the policy, went: a
// refused one leaves the daemon serving on what it had, which the log says once and the
// status and metrics keep saying until a load succeeds.
type reloadState struct {
	config, policy atomic.Pointer[loadAttempt]
	// rules is the last load of the admin settings files (policy_dir's *.json) that came with
	// a policy load. Unlike a refused policy, a refused file does not leave the old rules in
	// force: every session's rules include them, so new sessions are refused and open ones
	// suspended until the files load (Core.reloadRules).
	rules atomic.Pointer[loadAttempt]
}

// loadAttempt is one load: when, and why it was refused ("" when it was not).
type loadAttempt struct {
	at  time.Time
	err string
}

func (r *reloadState) record(which *atomic.Pointer[loadAttempt], err error) {
	a := &loadAttempt{at: time.Now()}
	if err != nil {
		a.err = err.Error()
	}
	which.Store(a)
}

// ok says whether the last attempt of which succeeded (or none was made).
func (r *reloadState) ok(which *atomic.Pointer[loadAttempt]) bool {
	a := which.Load()
	return a == nil || a.err == ""
}

// policyOK says whether the policy and the admin settings beside it both loaded last time.
func (r *reloadState) policyOK() bool { return r.ok(&r.policy) && r.ok(&r.rules) }

// summary says what was refused and what is in force meanwhile, or "".
func (r *reloadState) summary() string {
	out := ""
	if a := r.rules.Load(); a != nil && a.err != "" {
		out = fmt.Sprintf("admin settings refused at %s: every new session is refused and open ones are suspended until they load: %s", a.at.UTC().Format(time.RFC3339), a.err)
	}
	for _, c := range []struct {
		what string
		a    *loadAttempt
	}{{"configuration", r.config.Load()}, {"policy", r.policy.Load()}} {
		if c.a == nil || c.a.err == "" {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += fmt.Sprintf("%s reload refused at %s, the previous one stays in force: %s", c.what, c.a.at.UTC().Format(time.RFC3339), c.a.err)
	}
	return out
}
