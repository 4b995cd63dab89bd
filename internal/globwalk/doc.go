// Package globwalk expands a shell glob as the file system holds it, within bounds, to find
// the matches that lead out of a set of directories through symbolic links.
package globwalk
