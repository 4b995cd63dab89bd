// Package sdnotify speaks systemd's readiness protocol (sd_notify(3)): one datagram to
// $NOTIFY_SOCKET, so a Type=notify unit knows when the daemon serves, reloads and stops.
package sdnotify
