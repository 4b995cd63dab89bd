// Package offline is sbctl's commands that need no daemon but link heavy packages (the
// classifier, OPA, the audit verifier); they run in sbctl-full, never on the client's fast path.
package offline
