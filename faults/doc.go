// Package faults runs a real sandboxd under crashes, disconnects, full disks, hung hooks and reloads (root-only tests), and is the harness sbbench starts its daemon with.
package faults
