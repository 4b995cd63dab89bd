// Package api is the socket protocol's server: peer credentials, the HTTP handlers, and the daemon's types turned into package protocol's wire types.
package api
