// Package procs narrows the daemon's Go scheduler to one P while the daemon serves a single
// call and nothing else, and widens it to the runtime's default whenever work can run side by
// side.
//
// Why: with a second P, every goroutine a call readies (the HTTP server's background read,
// the output pumps, the audit writer, ...) makes the runtime wake an idle P's thread to look
// for work. Over paced Bash calls that was ~13 thread wake-ups a call that found nothing to
// do, each on a CPU the call's own init and program wanted. One P runs a lone call's Go code,
// which is sequential anyway, without them. But one P for everything stalls a call behind
// work beside it: the pool's refill and the janitor make dozens of short cgroup and mount
// system calls in a row, and a P inside a system call is only taken back by the runtime's
// monitor after it has stayed there a whole tick, so a second call's request went unnoticed
// for up to 3 ms. Hence both: that work, and any request beside a call, holds Parallel.
//
// Enable is the daemon's choice (cmd/sandboxd); without it Parallel only counts, so the
// packages that hold it behave the same in tests and benchmarks of their own.
package procs

import (
	"os"
	"runtime"
	"sync"
)

var (
	mu      sync.Mutex
	enabled bool
	holds   int
)

// Enable narrows GOMAXPROCS to one until Parallel is held, and reports whether it did: not
// where GOMAXPROCS is set in the environment (the admin's number stands) or where the
// runtime's default is already one.
func Enable() bool {
	mu.Lock()
	defer mu.Unlock()
	if enabled {
		return true
	}
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) <= 1 {
		return false
	}
	enabled = true
	if holds == 0 {
		runtime.GOMAXPROCS(1)
	}
	return true
}

// Disable gives the runtime its default back for good (tests).
func Disable() {
	mu.Lock()
	defer mu.Unlock()
	if enabled {
		enabled = false
		runtime.SetDefaultGOMAXPROCS()
	}
}

// Parallel widens GOMAXPROCS to the runtime's default (CPUs, affinity and cgroup quota, kept
// up to date by the runtime) until release is called; holds nest, and the last release
// narrows it again. Each change stops the world for ~10 µs, so a hold belongs around a burst
// of work, not a single system call. release may be called more than once.
func Parallel() (release func()) {
	mu.Lock()
	holds++
	if enabled && holds == 1 {
		runtime.SetDefaultGOMAXPROCS()
	}
	mu.Unlock()
	var once sync.Once
	return func() { once.Do(unhold) }
}

func unhold() {
	mu.Lock()
	defer mu.Unlock()
	holds--
	if enabled && holds == 0 {
		runtime.GOMAXPROCS(1)
	}
}

// Holds is how many holds of Parallel are taken now.
func Holds() int {
	mu.Lock()
	defer mu.Unlock()
	return holds
}
