// Package client is the Go client of sandboxd's protocol: the calls over the daemon's socket, with package protocol's wire types.
package client
