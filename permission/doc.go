// Package permission holds rule syntax, settings sources and precedence, the facts gathered for the policy, and the Decision type.
package permission
