// Package api is the socket protocol: wire types, peer credentials, and the HTTP handlers; the only place that knows the protocol's JSON field names.
package api
