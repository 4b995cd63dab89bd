// Package egress is the filtering proxy between a session and the network (HTTP forward proxy, CONNECT, SOCKS5): it resolves once, refuses private addresses, asks the policy per connection, audits each decision and dials exactly the address it checked; plain HTTP is decided by method and path too, HTTPS by host only unless TLS interception is on (then by method and path as well).
package egress
