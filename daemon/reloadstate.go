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

// summary says what was refused and that the previous version stays in force, or "".
func (r *reloadState) summary() string {
	out := ""
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
