// Package protocol holds the JSON wire types of sandboxd's HTTP API, shared by the daemon and its clients.
package protocol
