// Package policy loads the Rego policy (embedded, admin *.rego, or an OPA bundle) and evaluates permission decisions with prepared OPA queries.
package policy
