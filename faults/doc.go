// Package faults runs a real sandboxd under crashes, disconnects, full disks, hung hooks and
// reloads (root-only tests). It holds tests only; the daemon harness is internal/harness.
package faults
