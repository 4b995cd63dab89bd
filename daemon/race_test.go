//go:build race

package daemon

// raceMemFactor scales memory bounds measured on the test process: the race detector's shadow
// memory costs several times the heap it watches.
const raceMemFactor = 4

// raceEnabled: this test binary runs under the race detector.
const raceEnabled = true
