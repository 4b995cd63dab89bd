// Package session holds sessions: owner, directories, mode, rules, parent, read-file state and result budget.
package session
