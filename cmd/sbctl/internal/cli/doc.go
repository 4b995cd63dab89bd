// Package cli is sbctl's client commands: flags and wiring over package client. It links no
// policy engine, schema compiler or audit code, so `sbctl hook` and `sbctl bash` start fast;
// the commands that need them (Heavy) run in sbctl-full.
package cli
