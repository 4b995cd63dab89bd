// Package egress is the filtering proxy between a session and the network (HTTP forward proxy, CONNECT, SOCKS5): it resolves once, refuses private addresses, asks the policy per connection, audits each decision and dials exactly the address it checked; HTTPS is decided by host only (no TLS interception), plain HTTP also by method and path.
package egress
