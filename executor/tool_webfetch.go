package executor

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/worker"
)

// WebFetch limits.
const (
	webFetchMaxURLLen    = 2000     // as the agents
	webFetchMaxBodyBytes = 10 << 20 // what is read of a response; the rest is cut with a note
	webFetchTimeout      = 60 * time.Second
	webFetchMaxRedirects = 10
	webFetchMaxChars     = 100_000 // inline; longer results are persisted with a preview
)

// webFetchHeldBounds: one user's fetches running at once read two whole pages, each held
// about four times over (the page, its text, the result, its copy out), and at least 1 MiB
// each past that.
var webFetchHeldBounds = heldBounds{perCall: webFetchMaxBodyBytes, perUser: 2 * webFetchMaxBodyBytes, least: 1 << 20}

const webFetchSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["url", "prompt"],
  "properties": {
    "url": {"type": "string", "format": "uri", "description": "The URL to fetch content from"},
    "prompt": {"type": "string", "description": "The prompt to run on the fetched content"}
  }
}`

// WebFetchNet is how the WebFetch tool reaches the network; the daemon sets it. Every request
// goes through the session's egress proxy, so the same rules, private-address guard and audit
// apply as to a proxied session's programs; the daemon never fetches with its own network.
type WebFetchNet struct {
	// Dial opens a connection to the egress proxy, served for session with o. Nil: WebFetch
	// has no network and refuses.
	Dial func(ctx context.Context, session string, o egress.Origin) (net.Conn, error)
	// PlainHTTP reports network.webfetch_plain_http: fetch http:// URLs as given instead of
	// upgrading them to https://.
	PlainHTTP func() bool
	// TLS is the client TLS configuration (nil: the host's roots; tests give a test CA).
	TLS *tls.Config
}

func webFetchDef(h *Host) Def {
	return Def{
		Name: "WebFetch",
		Description: "Fetches a URL and returns its content, HTML converted to Markdown. http:// URLs are upgraded to https://. " +
			"The fetch goes through the session's egress policy: the host needs an allow rule (WebFetch(domain:host) or " +
			"WebFetch(GET host/path)) or a person's approval, and private addresses are refused. A redirect to another host is " +
			"reported, not followed: call WebFetch again with the new URL. The prompt is not run (sandboxd has no model of its " +
			"own): it is echoed, and the content is returned for you to read with it in mind.",
		Schema:          webFetchSchema,
		ConcurrencySafe: always,
		// Not read-only for the policy: it reaches the network, which needs a rule or a person
		// (modes.rego), and its start is recorded durably before anything leaves.
		Destructive:        func(Input) bool { return false },
		Validate:           validateWebFetch,
		Backfill:           h.backfillWebFetch,
		CheckPermissions:   webFetchFacts,
		MaxResultSizeChars: webFetchMaxChars,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			return h.runWebFetch(ctx, c)
		},
	}
}

// fetchURL parses and checks one URL WebFetch may request: http or https, a host that is an
// IP literal or a dotted name other than localhost (the agents refuse localhost and dotless
// names), no credentials, no fragment (dropped).
func fetchURL(raw string) (*url.URL, error) {
	if len(raw) > webFetchMaxURLLen {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("url is %d characters long; at most %d", len(raw), webFetchMaxURLLen))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errcode.New(errcode.Validation, fmt.Errorf("url %q does not parse: %w", raw, err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("url %q: only http and https URLs are fetched", raw))
	}
	if u.User != nil {
		return nil, errcode.Msg(errcode.Validation, "the url carries credentials (user@host); WebFetch sends none, remove them")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("url %q has no host", raw))
	}
	// The rules see the host as the proxy does: an address in one canonical form
	// (::ffff:1.2.3.4 is 1.2.3.4), and no spelling a fetcher would read as an address the
	// rules do not name (0x7f.1, 64:ff9b::7f00:1), nor a wildcard character, since the host
	// becomes the call's suggested domain rule (*.com asked for once, then remembered).
	host, err := egress.PolicyHost(u.Hostname())
	if err != nil {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("url %q: %v", raw, err))
	}
	if net.ParseIP(host) == nil {
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return nil, errcode.Msg(errcode.Validation, "WebFetch does not fetch from localhost")
		}
		if !strings.Contains(host, ".") {
			return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("host %q has no dot: WebFetch fetches public names only", host))
		}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("url %q: bad port", raw))
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

func validateWebFetch(_ context.Context, c *Call) error {
	_, err := fetchURL(c.Input.String("url"))
	return err
}

// backfillWebFetch upgrades http:// to https:// (as the agents do) unless the daemon is set to
// fetch plain http; the call is decided and recorded with the URL that is fetched.
func (h *Host) backfillWebFetch(c *Call) error {
	u, err := fetchURL(c.Input.String("url"))
	if err != nil {
		return err
	}
	if u.Scheme == "http" && !h.webFetchPlainHTTP() {
		u.Scheme = "https"
		if u.Port() == "80" {
			u.Host = u.Hostname()
		}
	}
	c.Input["url"] = u.String()
	return nil
}

func (h *Host) webFetchPlainHTTP() bool {
	return h.WebFetch.PlainHTTP != nil && h.WebFetch.PlainHTTP()
}

// webFetchFacts gives the policy the host and the request WebFetch makes first (GET and the
// path): domain rules and WebFetch(METHOD host/path) rules decide it.
func webFetchFacts(_ context.Context, c *Call) (permission.ToolFacts, error) {
	u, err := fetchURL(c.Input.String("url"))
	if err != nil {
		return permission.ToolFacts{}, err
	}
	host, err := egress.PolicyHost(u.Hostname())
	if err != nil {
		return permission.ToolFacts{}, errcode.New(errcode.Validation, err)
	}
	return permission.ToolFacts{
		Domain: host,
		HTTP:   &permission.HTTPFact{Method: http.MethodGet, Path: egress.RootedPath(u.Path)},
	}, nil
}

// runWebFetch fetches the URL through the session's egress proxy, following redirects on the
// same host (each hop decided by the proxy like the first) and reporting one to another host.
func (h *Host) runWebFetch(ctx context.Context, c *Call) (*Result, error) {
	if h.WebFetch.Dial == nil {
		return nil, errcode.Msg(errcode.Unavailable, "WebFetch has no network in this daemon")
	}
	ctx, cancel := context.WithTimeout(ctx, webFetchTimeout)
	defer cancel()
	start := time.Now()
	u, err := fetchURL(c.Input.String("url"))
	if err != nil {
		return nil, err
	}
	first := u.String()
	for hop := 0; ; hop++ {
		// A person's approval covers the URL they saw, not where it redirects.
		resp, err := h.fetchOnce(ctx, c, u, c.Approved && hop == 0)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, errcode.New(errcode.Timeout, fmt.Errorf("fetch %s: no answer within %s", u, webFetchTimeout))
			}
			return nil, err
		}
		if !isRedirect(resp.StatusCode) {
			defer resp.Body.Close()
			return h.webFetchResult(ctx, c, u, resp, time.Since(start))
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		next, perr := u.Parse(loc)
		if loc == "" || perr != nil {
			return nil, errcode.Msg(errcode.ToolFailed, fmt.Sprintf("%s answered %s with no usable Location", u, resp.Status))
		}
		if next.Scheme == "http" && !h.webFetchPlainHTTP() {
			next.Scheme = "https"
			if next.Port() == "80" {
				next.Host = next.Hostname()
			}
		}
		n, verr := fetchURL(next.String())
		if verr != nil || !sameOrigin(u, n) {
			return redirectReport(first, u, next, resp), nil
		}
		if hop+1 >= webFetchMaxRedirects {
			return nil, errcode.Msg(errcode.ToolFailed, fmt.Sprintf("more than %d redirects from %s", webFetchMaxRedirects, first))
		}
		u = n
	}
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// sameOrigin reports whether a redirect from a to b stays on a's host and port (an upgrade of
// http to https on the same host counts), the only redirects WebFetch follows.
func sameOrigin(a, b *url.URL) bool {
	if !strings.EqualFold(strings.TrimSuffix(a.Hostname(), "."), strings.TrimSuffix(b.Hostname(), ".")) {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "https" {
			return "443"
		}
		return "80"
	}
	if a.Scheme == b.Scheme {
		return port(a) == port(b)
	}
	return a.Scheme == "http" && b.Scheme == "https" && port(a) == "80" && port(b) == "443"
}

// redirectReport is the result of a redirect WebFetch does not follow.
func redirectReport(first string, from, to *url.URL, resp *http.Response) *Result {
	text := fmt.Sprintf("REDIRECT NOT FOLLOWED: %s answered %s with a redirect to another host.\n"+
		"Original URL: %s\nRedirect URL: %s\n\nTo fetch it, call WebFetch again with url %q; it is decided by the policy on its own.\n",
		from, resp.Status, first, to, to.String())
	return &Result{Content: []Block{{Type: "text", Text: text}}, Data: map[string]any{
		"url": first, "code": resp.StatusCode, "codeText": http.StatusText(resp.StatusCode), "redirect": to.String(),
	}}
}

// fetchOnce sends one GET of u through the session's egress proxy, on a connection of its own
// that tells the proxy what it carries (the tunnel of an https URL is decided by that method
// and path, as a plain http request is). Keep-alive is off, so every hop is decided again.
func (h *Host) fetchOnce(ctx context.Context, c *Call, u *url.URL, approved bool) (*http.Response, error) {
	origin := egress.Origin{Via: "WebFetch", Method: http.MethodGet, Path: egress.RootedPath(u.Path), Approved: approved}
	var refusal atomic.Pointer[string] // set on the dialing goroutine
	tr := &http.Transport{
		// The address is never dialed: DialContext hands back the in-process proxy connection.
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.sandboxd.invalid:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return h.WebFetch.Dial(ctx, c.Session.ID, origin)
		},
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
				msg := strings.TrimSpace(string(b))
				if msg == "" {
					msg = "the egress proxy refused the tunnel: " + resp.Status
				}
				refusal.Store(&msg)
			}
			return nil
		},
		TLSClientConfig:        h.WebFetch.TLS,
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1 only
		DisableKeepAlives:      true,
		TLSHandshakeTimeout:    15 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, errcode.New(errcode.Validation, fmt.Errorf("build the request for %s: %w", u, err))
	}
	req.Header.Set("User-Agent", "sandboxd-webfetch/1")
	req.Header.Set("Accept", "text/markdown, text/html;q=0.9, text/plain;q=0.8, */*;q=0.5")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		if msg := refusal.Load(); msg != nil {
			return nil, errcode.Msg(errcode.PermissionDenied, *msg)
		}
		return nil, errcode.New(errcode.ToolFailed, fmt.Errorf("fetch %s: %w", u, err))
	}
	// The proxy's own refusal of a plain http request (its Proxy-Status names it).
	if strings.HasPrefix(resp.Header.Get("Proxy-Status"), "sandboxd;") && resp.StatusCode >= 400 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
		resp.Body.Close()
		code := errcode.PermissionDenied
		if resp.StatusCode != http.StatusForbidden {
			code = errcode.ToolFailed
		}
		return nil, errcode.Msg(code, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// webFetchResult turns a response into the tool's result: HTML as Markdown, other text as it
// is, anything else described, never shown.
func (h *Host) webFetchResult(ctx context.Context, c *Call, u *url.URL, resp *http.Response, took time.Duration) (*Result, error) {
	// The page, its text and the result made of it are in the daemon's memory until the
	// result is out: what the user's other fetches hold now leaves this one less to read.
	uid := c.Session.Owner.Tenant() // a user's subordinate uids share its room
	room := h.fetchHeld.take(uid, webFetchHeldBounds)
	defer h.fetchHeld.give(uid, room)
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(min(resp.ContentLength, room+1)))
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, room+1)); err != nil {
		return nil, errcode.New(errcode.ToolFailed, fmt.Errorf("read the response of %s: %w", u, err))
	}
	body := buf.Bytes()
	cut := int64(len(body)) > room
	if cut {
		body = body[:room]
	}
	ctype := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ctype)
	var content string
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml" || mt == "" && looksHTML(body):
		text, textCut, err := decodeText(body, ctype, room)
		cut = cut || textCut
		if err != nil {
			return nil, errcode.New(errcode.ToolFailed, fmt.Errorf("decode %s: %w", u, err))
		}
		// In the session's worker, as its owner and within its limits: what a page costs to
		// convert is its fetcher's to pay, never the root daemon's.
		w, err := h.Worker(ctx, c.Session)
		if err != nil {
			return nil, err
		}
		md, err := w.Markdown(ctx, text, u.Scheme+"://"+u.Host)
		if errors.Is(err, worker.ErrGone) {
			return nil, errcode.New(errcode.ToolFailed, fmt.Errorf("convert the HTML of %s: the converter ran out of the session's limits (memory or time): %w", u, err))
		}
		if err != nil {
			return nil, fmt.Errorf("convert the HTML of %s to Markdown: %w", u, err)
		}
		content = md
	case textual(mt):
		text, textCut, err := decodeText(body, ctype, room)
		cut = cut || textCut
		if err != nil {
			return nil, errcode.New(errcode.ToolFailed, fmt.Errorf("decode %s: %w", u, err))
		}
		content = string(text)
	default:
		content = fmt.Sprintf("[%s content of %d bytes is not shown: WebFetch returns text and HTML only]", mt, len(body))
	}
	var b strings.Builder
	b.Grow(len(content) + 512)
	fmt.Fprintf(&b, "Fetched %s: %s", u, resp.Status)
	if mt != "" {
		fmt.Fprintf(&b, ", %s", mt)
	}
	fmt.Fprintf(&b, ", %d bytes", len(body))
	switch {
	case cut && room < webFetchMaxBodyBytes:
		fmt.Fprintf(&b, " (cut at %s of page or text: your other fetches running now hold the rest of what one user's may)", humanBytes(room))
	case cut:
		fmt.Fprintf(&b, " (cut at %s of page or text)", humanBytes(room))
	}
	b.WriteString(".\n")
	if p := c.Input.String("prompt"); p != "" {
		b.WriteString("The prompt was not run: sandboxd has no model of its own. Read the content below with it in mind.\n")
	}
	b.WriteString("\n")
	b.WriteString(content)
	return &Result{
		Content: []Block{{Type: "text", Text: b.String()}},
		IsError: resp.StatusCode >= 400,
		Data: map[string]any{
			"url": u.String(), "code": resp.StatusCode, "codeText": http.StatusText(resp.StatusCode),
			"bytes": len(body), "durationMs": took.Milliseconds(), "prompt": c.Input.String("prompt"),
		},
	}, nil
}

// textual reports media types shown as text.
func textual(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"):
		return true
	case strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/x-javascript",
		"application/ecmascript", "application/x-yaml", "application/yaml", "application/toml", "application/x-sh":
		return true
	}
	return false
}

func looksHTML(b []byte) bool {
	head := strings.ToLower(strings.TrimSpace(string(b[:min(len(b), 512)])))
	return strings.HasPrefix(head, "<!doctype html") || strings.HasPrefix(head, "<html")
}

// decodeText converts a body to UTF-8 by its declared or sniffed charset, at most limit bytes
// of it (a single-byte charset's text is up to three times its bytes); bytes that are not
// valid UTF-8 afterwards are replaced.
func decodeText(body []byte, ctype string, limit int64) (text []byte, cut bool, err error) {
	b := body
	if r, err := charset.NewReader(bytes.NewReader(body), ctype); err == nil {
		var buf bytes.Buffer
		buf.Grow(int(min(int64(len(body)), limit)))
		if _, err := buf.ReadFrom(io.LimitReader(r, limit+1)); err != nil {
			return nil, false, err
		}
		b = buf.Bytes()
		if cut = int64(len(b)) > limit; cut {
			b = b[:limit]
		}
	}
	if !utf8.Valid(b) {
		return bytes.ToValidUTF8(b, []byte("\uFFFD")), cut, nil
	}
	return b, cut, nil
}
