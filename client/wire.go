package client

// The wire types are package protocol's: a leaf of the standard library only, so a client
// does not link api/ and the daemon's stack behind it (executor, the JSON Schema compiler,
// Prometheus, audit, zap), whose package init would cost ~40 ms on every start.

// DefaultSocket is where the daemon serves by default (config.DefaultSocket).
const DefaultSocket = "/run/sandboxd/sandboxd.sock"
