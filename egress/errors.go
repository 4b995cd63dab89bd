package egress

import "errors"

var (
	// ErrServerClosed is returned by Serve once Close has been called.
	ErrServerClosed = errors.New("egress server closed")
	// ErrBusy is returned by ServeConn when MaxConns connections are being served.
	ErrBusy = errors.New("egress proxy: too many concurrent connections")
	// ErrBadRequest marks proxy input that cannot be parsed (malformed HTTP, SOCKS or host).
	ErrBadRequest = errors.New("malformed proxy request")
	// ErrNotProxyRequest marks an origin-form HTTP request sent to the proxy as if it were the server.
	ErrNotProxyRequest = errors.New("not a proxy request")
	// ErrUnsupported marks a well-formed request the proxy does not serve (SOCKS BIND or UDP
	// ASSOCIATE, an unknown address type, an https:// absolute URL, SOCKS authentication).
	ErrUnsupported = errors.New("unsupported proxy request")
	// ErrNoAddress marks a name that resolved to no address.
	ErrNoAddress = errors.New("no address")
	// ErrNotChecked marks an upstream dial of an address that is not an IP literal: the proxy only
	// ever dials an address it has checked, never a name.
	ErrNotChecked = errors.New("dial of an unchecked address")

	// errUnendedRequestLine ends a tunnel whose stream ended (or failed) in the middle of a first
	// line that, ended there, would be an HTTP request: its start has gone up, so the upstream
	// connection is reset rather than ended.
	errUnendedRequestLine = errors.New("the tunnel's stream ended inside what would be an HTTP request line")

	// errHeadTooLarge ends a read of a request's head past maxHeadBytes.
	errHeadTooLarge = errors.New("request line and headers over 64 KiB")
)
