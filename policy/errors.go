package policy

import "errors"

// Sentinels callers test with errors.Is. Any error from Decide means deny with code
// policy_eval_error (errcode.PolicyEval).
var (
	// ErrPolicyNotLoaded: no policy has been compiled yet (or the engine is closed).
	ErrPolicyNotLoaded = errors.New("policy not loaded")
	// ErrPolicyCompile: a policy file or bundle does not parse or compile; the running policy
	// stays in force.
	ErrPolicyCompile = errors.New("policy does not compile")
	// ErrCustomPackage: an admin module declares a package outside sandboxd.custom.
	ErrCustomPackage = errors.New("custom policy outside package sandboxd.custom")
	// ErrUndefinedDecision: the entrypoint produced no result; the caller denies.
	ErrUndefinedDecision = errors.New("policy decision undefined")
	// ErrBadDecision: the entrypoint produced a value that is not a decision.
	ErrBadDecision = errors.New("policy decision malformed")
	// ErrNilFacts: Decide was called without facts or rules.
	ErrNilFacts = errors.New("no facts or rules for decision")
)
