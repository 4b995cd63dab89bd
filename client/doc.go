// Package client is the Go client of sandboxd's protocol: its wire types and the calls over the daemon's socket.
package client
