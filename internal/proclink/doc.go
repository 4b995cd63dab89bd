// Package proclink finds a symbolic link on a path's way that leads into /proc or /dev/fd,
// where what the rest of the path names depends on the process that opens it.
package proclink
