// Package daemon wires the daemon together: caller identity, session lifecycle, the socket, signals, reload and drain.
package daemon
