//go:build !race

package daemon

// raceMemFactor scales memory bounds measured on the test process (see race_test.go).
const raceMemFactor = 1

// raceEnabled: this test binary runs under the race detector (see race_test.go).
const raceEnabled = false
