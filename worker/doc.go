// Package worker is the per-session file-tool worker: a confined re-exec of the daemon that reads, writes, edits, globs and greps as the session owner.
package worker
