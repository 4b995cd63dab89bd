package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sandboxd/sandboxd/internal/pctenc"
)

// denyBody is what an agent reads when it is refused. It says what was refused (the method and
// path too, when a rule about them decided) and why, and, because agents otherwise try curl,
// then wget, then https, then a raw socket, that another route will not help: the same policy
// decides every route, and a tunnel is held to a method/path deny on its host.
func denyBody(t target, reason string) string {
	what := t.hostport()
	if t.method != "" {
		what = t.method + " " + t.scheme() + "://" + what + t.path
	} else if t.kind == KindConnect {
		what = "a tunnel (CONNECT) to " + what
	}
	return "sandboxd egress policy denied " + what + ": " + reason +
		". Do not retry through another route (another client, https, a tunnel or a raw socket): the same policy applies there. " +
		"If this access is needed, ask the user to change the policy.\n"
}

// textResponse is a complete small response; proxyStatus, if set, is an RFC 9209 error type.
func textResponse(code int, body, proxyStatus string, closeConn bool) []byte {
	var b strings.Builder
	b.WriteString("HTTP/1.1 ")
	b.WriteString(strconv.Itoa(code))
	b.WriteByte(' ')
	b.WriteString(http.StatusText(code))
	b.WriteString("\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(body)))
	b.WriteString("\r\n")
	if proxyStatus != "" {
		b.WriteString("Proxy-Status: sandboxd; error=" + proxyStatus + "\r\n")
	}
	if closeConn {
		b.WriteString("Connection: close\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return []byte(b.String())
}

const notProxyBody = "sandboxd egress proxy: this is a proxy, not a web server. Send proxy requests: " +
	"CONNECT host:port for https, or an absolute URL (GET http://host/path) for http; " +
	"set HTTP_PROXY/HTTPS_PROXY to this address.\n"

// httpConn is one client connection speaking HTTP/1.1 to the proxy, or the decrypted stream of
// an intercepted tunnel (tunnel set).
type httpConn struct {
	s    *Server
	c    net.Conn  // what the client is answered on (the TLS side of an intercepted tunnel)
	ic   *idleConn // the client's socket, for the deadlines and the activity
	br   *bufio.Reader
	bw   *bufio.Writer
	peer peer
	// tunnel is the target of the tunnel the requests came through: they are origin-form for
	// that host only, decided as inner (KindHTTPS: an intercepted tunnel's, forwarded over TLS
	// through tr; KindHTTP: plain HTTP a tunnel carries, serveTunnelHTTP).
	tunnel *target
	inner  Kind
	tr     http.RoundTripper
	up     *upstream // the plain HTTP requests' kept upstream connection (upstream.go)
}

// serveHTTP reads requests until the client closes, a request cannot continue the connection
// (a CONNECT, a refused body, Connection: close) or ctx ends.
func (s *Server) serveHTTP(ctx context.Context, c *idleConn, br *bufio.Reader, p peer) {
	tr := s.forwarder()
	defer tr.CloseIdleConnections()
	h := &httpConn{s: s, c: c, ic: c, br: br, bw: bufio.NewWriterSize(c, 16<<10), peer: p, tr: tr}
	defer h.dropUpstream()
	h.loop(ctx)
}

// loop serves the connection's requests one after the other, each decided on its own.
func (h *httpConn) loop(ctx context.Context) {
	for first := true; ; first = false {
		if !first {
			// Between requests the connection is idle: wait for the next one's first byte with
			// the idle deadline, then give its header the header deadline.
			h.ic.setHard(time.Time{})
			if _, err := h.br.Peek(1); err != nil {
				return
			}
			h.ic.setHard(time.Now().Add(h.s.headerTimeout()))
		}
		req, err := http.ReadRequest(h.br)
		if err != nil {
			// Past the bound the parser may see a cut line rather than the error (a TLS
			// record ends mid-line), so the budget itself says why.
			if errors.Is(err, errHeadTooLarge) || h.ic.headSpent() {
				h.refuse(http.StatusRequestHeaderFieldsTooLarge, "sandboxd egress proxy: "+errHeadTooLarge.Error()+"\n", "http_request_error")
			} else if !errors.Is(err, io.EOF) {
				msg := err.Error()
				if len(msg) > 512 { // the parser quotes the line it could not parse
					msg = strings.ToValidUTF8(msg[:512], "") + "…"
				}
				h.refuse(http.StatusBadRequest, "sandboxd egress proxy: malformed request: "+msg+"\n", "http_request_error")
			}
			return
		}
		h.ic.setHard(time.Time{})
		if !h.handle(ctx, req) {
			return
		}
	}
}

// unparsed is the target of a request refused before it could be decided, for its record:
// the host as the request names it, made fit for the audit log.
func (h *httpConn) unparsed(req *http.Request) target {
	t := target{kind: KindHTTP, method: req.Method, host: req.URL.Host}
	switch {
	case h.tunnel != nil:
		t.kind = h.inner
		if req.Host != "" {
			t.host = req.Host
		}
	case req.Method == http.MethodConnect:
		t.kind, t.method = KindConnect, ""
	case t.host == "":
		t.host = req.Host
	}
	if host, port, err := net.SplitHostPort(t.host); err == nil {
		t.host = host
		t.port, _ = strconv.Atoi(port)
	}
	if t.port == 0 && h.tunnel != nil {
		t.port = h.tunnel.port // a Host without a port names the tunnel's, as the origin reads it
	}
	t.host = auditableHost(t.host)
	return t
}

// refuse answers with a small text response and ends the connection.
func (h *httpConn) refuse(code int, body, proxyStatus string) {
	_, _ = h.bw.Write(textResponse(code, body, proxyStatus, true))
	_ = h.bw.Flush()
	lingerClose(h.c)
}

// handle serves one request and reports whether the connection may carry another.
func (h *httpConn) handle(ctx context.Context, req *http.Request) bool {
	var t target
	var err error
	if h.tunnel != nil {
		t, err = parseInner(req, *h.tunnel, h.inner)
	} else {
		t, err = parseHTTP(req)
	}
	switch {
	case errors.Is(err, ErrNotProxyRequest):
		h.s.recordRefusal(ctx, h.peer, h.unparsed(req), nil, err.Error())
		h.refuse(http.StatusBadRequest, notProxyBody, "http_request_error")
		return false
	case err != nil:
		// A host no rule could be asked about (127.1, a zone, another host inside a tunnel)
		// is an attempt the audit log shows all the same.
		h.s.recordRefusal(ctx, h.peer, h.unparsed(req), nil, err.Error())
		h.refuse(http.StatusBadRequest, "sandboxd egress proxy: "+err.Error()+"\n", "http_request_error")
		return false
	}
	if t.method != "" {
		if err := checkOverrides(req); err != nil {
			h.s.recordRefusal(ctx, h.peer, t, nil, err.Error())
			h.refuse(http.StatusBadRequest, "sandboxd egress proxy: "+err.Error()+"\n", "http_request_denied")
			return false
		}
	}
	if t.kind == KindConnect && h.s.Intercept != nil && h.peer.origin == nil {
		// Decided per request inside, once the tunnel shows TLS (or by host if it does not);
		// paced here, as a tunnel is without interception (admit): each new host's
		// certificate costs the daemon a signature.
		if err := h.s.pace(ctx, h.peer); err != nil {
			h.refuse(http.StatusTooManyRequests, "sandboxd egress proxy: "+err.Error()+"\n", "http_request_denied")
			return false
		}
		h.intercept(ctx, t)
		return false
	}
	dst, out, reason, pathRules := h.s.admit(ctx, h.peer, t)
	switch out {
	case outDenied, outPrivate:
		ps := "http_request_denied"
		if out == outPrivate {
			ps = "destination_ip_prohibited"
		}
		// A refused request with no body leaves the connection clean for the next one.
		keep := req.Body == http.NoBody && !req.Close && (t.kind == KindHTTP || t.kind == KindHTTPS)
		_, _ = h.bw.Write(textResponse(http.StatusForbidden, denyBody(t, reason), ps, !keep))
		_ = h.bw.Flush()
		if !keep {
			lingerClose(h.c)
		}
		return keep
	case outResolve:
		h.refuse(http.StatusBadGateway, "sandboxd egress proxy: "+reason+"\n", "dns_error")
		return false
	case outPaced:
		h.refuse(http.StatusTooManyRequests, "sandboxd egress proxy: "+reason+"\n", "http_request_denied")
		return false
	}
	if t.kind == KindConnect {
		h.connect(ctx, t, dst, pathRules)
		return false
	}
	if pathRules && req.Method == http.MethodPost {
		if code, err := h.checkFormBody(req); err != nil {
			h.s.recordRefusal(ctx, h.peer, t, nil, err.Error())
			h.refuse(code, "sandboxd egress proxy: "+err.Error()+"\n", "http_request_denied")
			return false
		}
	}
	// Whatever rules name the host: the origin at its address may serve other names, and a
	// request hidden in the body carries a Host of its own (a POST for a host whose method a
	// rule denies, hidden in a GET to one no rule names).
	if req.Body != http.NoBody {
		if err := h.checkBodyStart(req); err != nil {
			h.s.recordRefusal(ctx, h.peer, t, nil, err.Error())
			h.refuse(http.StatusBadRequest, "sandboxd egress proxy: "+err.Error()+"\n", "http_request_denied")
			return false
		}
	}
	// Until its response is through: a long one (a stream, a big download) is ended when
	// the policy no longer allows it (Recheck), as a tunnel is.
	defer h.s.track(h.peer, t, dst, func() { _ = h.c.Close() })()
	return h.forward(ctx, req, dst)
}

// connect opens the tunnel of a CONNECT request; pathRules as carry takes it.
func (h *httpConn) connect(ctx context.Context, t target, dst netip.AddrPort, pathRules bool) {
	up, err := h.s.dial(ctx, dst)
	if err != nil {
		h.refuse(http.StatusBadGateway, "sandboxd egress proxy: cannot reach "+t.hostport()+": "+err.Error()+"\n", "connection_refused")
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = up.Close() })
	defer stop()
	if _, err := h.bw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err == nil {
		err = h.bw.Flush()
	}
	if err != nil {
		_ = up.Close()
		return
	}
	h.s.carry(ctx, h.peer, t, h.ic, up, dst, h.br, pathRules)
}

// Headers by which a request asks the server to act on another method or path than its own:
// Rack (Rails), Symfony and Laravel run a POST carrying X-HTTP-Method-Override: DELETE as a
// DELETE, and IIS's URL Rewrite and older Symfony route by X-Original-URL or X-Rewrite-URL.
// Compared lowercased with `_` as `-`, since CGI-style servers (Rack, WSGI) read both as `_`.
var (
	methodOverrideHeaders = []string{"x-http-method-override", "x-http-method", "x-method-override"}
	urlOverrideHeaders    = []string{"x-original-url", "x-rewrite-url"}
)

// checkOverrides refuses a request whose headers ask the server to act on another method or
// path than the request line's: the rules decide the method and path the proxy sees, and a
// server honoring such a header would act on one no rule decided (a POST allowed, then run as
// the DELETE a rule denies). A `_method` query parameter is one too (Symfony and Laravel read
// it from the query as from a form body), under any name PHP reads as `_method`
// (phpParamName). An override naming the request's own method changes nothing.
func checkOverrides(req *http.Request) error {
	if k, v, ok := methodOverridePair(req.URL.RawQuery, req.Method); ok {
		return fmt.Errorf("%w: the query parameter %.64q=%.64q, which PHP (so Symfony and Laravel) reads as _method, asks the server to act as another method than %s, which the egress rules did not decide; send the request with that method instead", ErrUnsupported, k, v, req.Method)
	}
	for k, vs := range req.Header {
		name := strings.ReplaceAll(strings.ToLower(k), "_", "-")
		switch {
		case slices.Contains(methodOverrideHeaders, name):
			for _, v := range vs {
				if !strings.EqualFold(textproto.TrimString(v), req.Method) {
					return fmt.Errorf("%w: the header %s: %.64q asks the server to act as another method than %s, which the egress rules did not decide; send the request with that method instead", ErrUnsupported, k, v, req.Method)
				}
			}
		case slices.Contains(urlOverrideHeaders, name):
			return fmt.Errorf("%w: the header %s asks the server to act on another path than the request's, which the egress rules did not decide; request that path instead", ErrUnsupported, k)
		}
	}
	return nil
}

// methodOverridePair finds in form-encoded pairs (a query, a urlencoded body) one PHP files
// under _method whose value is another method than method. Each pair is read as PHP reads it,
// leniently: url.ParseQuery drops a whole pair for one bad escape or a `;`, which PHP keeps.
// Split at `;` too, as servers that take it for `&` (Rack before 3, Python before 3.9.2) do.
func methodOverridePair(pairs, method string) (k, v string, ok bool) {
	for _, pair := range strings.FieldsFunc(pairs, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		if phpParamName(pctenc.DecodeLenient(k, true)) != "_method" {
			continue
		}
		if v = pctenc.DecodeLenient(v, true); !strings.EqualFold(strings.TrimSpace(v), method) {
			return k, v, true
		}
	}
	return "", "", false
}

// maxFormScan bounds the form body of a POST that checkFormBody reads before it is sent.
const maxFormScan = 64 << 10

// checkFormBody refuses a POST whose body holds a _method field naming another method: Rack
// (Rails), Symfony and Laravel act on such a POST as that method, one the rules did not decide
// (a DELETE they deny), reading it from a form, and Laravel from a JSON object too. The body is
// read before anything is sent, so it may be at most maxFormScan bytes, and then forwarded as
// read. Rack reads a POST with no Content-Type as a form too; one whose Content-Type cannot be
// read is taken for urlencoded. It returns the status to refuse with.
func (h *httpConn) checkFormBody(req *http.Request) (int, error) {
	if len(req.Header.Values("Content-Type")) > 1 {
		// Servers differ on which one counts; one of them may make it a form.
		return http.StatusBadRequest, fmt.Errorf("%w: a POST with more than one Content-Type to a host that method or path rules name cannot be checked for a _method field; send one", ErrUnsupported)
	}
	ct := req.Header.Get("Content-Type")
	mt, params, perr := mime.ParseMediaType(ct)
	// As Laravel's isJson tells a JSON body.
	isJSON := strings.Contains(ct, "/json") || strings.Contains(ct, "+json")
	// Rack parses multipart/mixed and multipart/related as forms too, and Rack and PHP find
	// the boundary in a Content-Type Go cannot parse (`multipart/form-data, boundary=x`).
	multi := strings.Contains(strings.ToLower(ct), "multipart")
	if ct != "" && perr == nil && mt != "application/x-www-form-urlencoded" && !multi && !isJSON {
		return 0, nil
	}
	if req.Body == http.NoBody {
		return 0, nil
	}
	if err := h.continueNow(req); err != nil {
		return http.StatusBadRequest, err
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxFormScan+1))
	if err != nil {
		return http.StatusBadRequest, fmt.Errorf("read the form body: %w", err)
	}
	if len(body) > maxFormScan {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("%w: a form POST to a host that method or path rules name is read whole before it is sent (a _method field in it makes Rails, Symfony and Laravel act as another method), and this one is over %d KiB; send a smaller one, or another content type", ErrUnsupported, maxFormScan>>10)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	override := func(k, v string) error {
		return fmt.Errorf("%w: the field %.64q=%.64q in the body, which Rails, Symfony and Laravel read as _method, asks the server to act as another method than %s, which the egress rules did not decide; send the request with that method instead", ErrUnsupported, k, v, req.Method)
	}
	if isJSON {
		var fields map[string]any
		if err := json.Unmarshal(body, &fields); err != nil {
			// PHP's json_decode takes some JSON Go's does not (1e400), and may find a
			// _method in it: a body no check can read is refused if it could hold one.
			var v any
			if json.Unmarshal(body, &v) != nil && bytes.Contains(bytes.ToLower(body), []byte("method")) {
				return http.StatusBadRequest, fmt.Errorf("%w: a JSON body this proxy cannot read (%v) may hold a _method field, which Laravel acts on as another method than %s; send valid JSON", ErrUnsupported, err, req.Method)
			}
			return 0, nil
		}
		if v, ok := fields["_method"].(string); ok && !strings.EqualFold(strings.TrimSpace(v), req.Method) {
			return http.StatusBadRequest, override("_method", v)
		}
		return 0, nil
	}
	if !multi || perr != nil {
		// A Content-Type that cannot be read is taken for urlencoded, as Rack takes it.
		if k, v, ok := methodOverridePair(string(body), req.Method); ok {
			return http.StatusBadRequest, override(k, v)
		}
		if !multi {
			return 0, nil
		}
	}
	placed := 0 // the _method fields found in parts, each naming the request's own method
	if perr == nil && params["boundary"] != "" {
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return http.StatusBadRequest, fmt.Errorf("%w: a multipart form body that cannot be read (%v) cannot be checked for a _method field", ErrUnsupported, err)
			}
			cd := p.Header.Values("Content-Disposition")
			if len(cd) > 1 {
				return http.StatusBadRequest, fmt.Errorf("%w: a multipart part with more than one Content-Disposition cannot be checked for a _method field (servers differ on which names it); send one", ErrUnsupported)
			}
			head := "Content-Disposition: " + strings.Join(cd, "") + "\nContent-ID: " + strings.Join(p.Header.Values("Content-Id"), " ")
			if !isMethodField(p.FormName()) && methodFieldNames(head) == 0 {
				continue
			}
			v, _ := io.ReadAll(io.LimitReader(p, 256))
			if !strings.EqualFold(strings.TrimSpace(string(v)), req.Method) {
				return http.StatusBadRequest, override("_method", string(v))
			}
			placed++
		}
	}
	// Rack finds a part's name with a loose pattern (and takes a Content-ID for it), PHP
	// joins a part's header line that has no colon to the one before (`name="_met` / `hod"`),
	// and parsers differ on where parts begin and on the boundary: a field named _method
	// anywhere in the body, its lines joined or not, that the parts above do not account for
	// may be one a server reads where this parser saw none.
	joined := strings.NewReplacer("\r", "", "\n", "").Replace(string(body))
	if max(methodFieldNames(string(body)), methodFieldNames(joined)) > placed {
		return http.StatusBadRequest, fmt.Errorf("%w: the multipart body names a _method field outside any part this proxy can read, which a server may still act on as another method than %s; send a well-formed multipart/form-data form", ErrUnsupported, req.Method)
	}
	return 0, nil
}

// looseFieldNameRE finds a field's name as the loosest multipart parsers do (Rack's
// `/Content-Disposition:.*\s+name=(VALUE)/i` and its Content-ID fallback, PHP's rfc1867):
// anywhere, in any case, quoted or not, `name*=` too.
var looseFieldNameRE = regexp.MustCompile(`(?i)(?:name\*?\s*=|content-id\s*:)\s*(?:"([^"\r\n]*)|'([^'\r\n]*)|([^;\s"]*))`)

// methodFieldNames counts the field names in s that a server may read as _method
// (looseFieldNameRE): each as given, and as Rack reads it, its backslashes dropped (it
// dequotes so) and an unquoted one cut at the first separator its token stops at.
func methodFieldNames(s string) int {
	n := 0
	for _, m := range looseFieldNameRE.FindAllStringSubmatch(strings.ReplaceAll(s, `\`, ""), -1) {
		name := m[1] + m[2] + m[3]
		token := name
		if i := strings.IndexAny(m[3], "()<>@,;:\"/[]?={}"); i >= 0 {
			token = m[3][:i]
		}
		if isMethodField(name) || isMethodField(token) {
			n++
		}
	}
	return n
}

// isMethodField reports whether a form field of this name is read as _method: by PHP's rules
// (phpParamName), which Rack shares for `_method[...]`, as given or past an RFC 2231
// `charset'language'` prefix.
func isMethodField(name string) bool {
	if phpParamName(name) == "_method" {
		return true
	}
	parts := strings.SplitN(name, "'", 3)
	return len(parts) == 3 && phpParamName(parts[2]) == "_method"
}

// continueNow answers a request that expects 100-continue before the proxy reads its body:
// the client waits for that before it sends the body.
func (h *httpConn) continueNow(req *http.Request) error {
	if !strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		return nil
	}
	req.Header.Del("Expect")
	if !req.ProtoAtLeast(1, 1) {
		return nil
	}
	_, _ = h.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n")
	if err := h.bw.Flush(); err != nil {
		return fmt.Errorf("write 100 Continue: %w", err)
	}
	return nil
}

// maxBodyStartScan bounds what checkBodyStart reads of a body before it is sent.
const maxBodyStartScan = 64 << 10

// bodyLooksHTTP is looksHTTP for a request's body, where scripts and prose begin with what a
// lax reading takes for a request line (`#!/bin/sh`, `Fix /api timeout`): a body is held to be a
// request when its first line names an HTTP version, or starts with a method as servers
// dispatch one (upper case) and white space.
func bodyLooksHTTP(b []byte) (isHTTP, known bool) {
	if isHTTP, known = looksHTTP(b); !isHTTP {
		return isHTTP, known
	}
	i := 0
	for i < len(b) && isSkippedBeforeRequest(b[i]) {
		i++
	}
	start := i
	for i < len(b) && b[i] >= 'A' && b[i] <= 'Z' {
		i++
	}
	if i > start && i < len(b) && isSpaceLike(b[i]) {
		return true, true
	}
	line, _, _ := bytes.Cut(b[start:], []byte{'\n'})
	return bytes.Contains(bytes.ToLower(line), []byte("http/")), true
}

// checkBodyStart refuses a request whose body begins as a request line does (looksHTTP, as a
// tunnel's stream is told). An origin that does not read a body it does not expect (a GET's,
// or any its handler ignores: Python's http.server) takes it for the connection's next request:
// one the proxy never decided nor recorded (a POST a rule denies, hidden in an allowed GET).
// Only as much of the body as tells is read before it is sent, at most maxBodyStartScan bytes.
func (h *httpConn) checkBodyStart(req *http.Request) error {
	if err := h.continueNow(req); err != nil {
		return err
	}
	var start []byte
	buf := make([]byte, 4096)
	for {
		n, err := req.Body.Read(buf)
		start = append(start, buf[:n]...)
		end := err != nil || len(start) >= maxBodyStartScan
		looks, known := bodyLooksHTTP(start)
		if !known && end {
			// An origin waits for the line's end, and takes the next bytes it gets for it.
			looks, known = bodyLooksHTTP(append(start[:len(start):len(start)], '\n'))
		}
		if looks {
			return fmt.Errorf("%w: the request's body begins as an HTTP request does, and an origin that ignores the body would run it as a request no rule decided; send it in another encoding", ErrUnsupported)
		}
		if known || end {
			if err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read the request body: %w", err)
			}
			req.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(start), req.Body), req.Body}
			return nil
		}
	}
}

// phpParamName is the name PHP files the query parameter name (decoded) under in $_GET, what
// Symfony and Laravel read `_method` from: cut at a NUL (PHP takes the name as a C string),
// leading spaces dropped, then ` ` and `.` taken as `_`, as is a `[` no `]` closes, and every
// ` `, `.` and `[` after that one; for `name[key]`, the array's own name (its value, an array,
// is then not a method, but some framework may take its first element). So `?.method=`,
// `?%5Bmethod=` and `?%20_method=` are all `$_GET['_method']` (php_register_variable_ex).
func phpParamName(name string) string {
	name, _, _ = strings.Cut(name, "\x00")
	name = strings.TrimLeft(name, " ")
	mangle := strings.NewReplacer(" ", "_", ".", "_")
	i := strings.IndexByte(name, '[')
	if i < 0 {
		return mangle.Replace(name)
	}
	if strings.IndexByte(name[i+1:], ']') >= 0 {
		return mangle.Replace(name[:i])
	}
	return mangle.Replace(name[:i]) + "_" + strings.NewReplacer(" ", "_", ".", "_", "[", "_").Replace(name[i+1:])
}

// hopHeaders are per-connection headers (RFC 9110 7.6.1) that must not be forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// trackedBody is the client's request body as the transport reads it. It remembers whether the
// body was read to its end: only then may the connection's reader serve the next request, since
// the transport can still be reading a body after the response is done.
type trackedBody struct {
	r   io.Reader
	eof atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if b.eof.Load() {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

// Close does not drain: draining is the connection's decision, made after the response.
func (b *trackedBody) Close() error { return nil }

// forward sends a plain HTTP request to dst and streams the response back. It reports whether
// the connection may carry another request.
func (h *httpConn) forward(ctx context.Context, req *http.Request, dst netip.AddrPort) bool {
	body := &trackedBody{r: req.Body}
	if req.Body == http.NoBody {
		body.eof.Store(true)
	}
	out := req.WithContext(ctx)
	out.RequestURI = ""
	u := *req.URL
	u.Scheme = "http"
	out.Host = req.URL.Host
	if h.tunnel != nil {
		// Inside a tunnel the request is origin-form; parseInner checked its Host is the tunnel's.
		if h.inner == KindHTTPS {
			u.Scheme = "https"
		}
		out.Host = req.Host
		if out.Host == "" {
			out.Host = h.tunnel.hostport()
		}
	}
	// The checked address goes in the URL, so the transport dials it (and pools connections by
	// it) and never resolves the name again; the Host header keeps the name.
	u.Host = dst.String()
	out.URL = &u
	if err := h.continueNow(req); err != nil { // before the transport reads the body
		return false
	}
	out.Header = req.Header.Clone()
	removeHopHeaders(out.Header)
	out.TransferEncoding = nil
	// A chunked body's trailers arrive after the request was decided and sent on, where no
	// check can see them first; a server that files them among the headers (Tomcat's
	// allowedTrailerHeaders) would act on an override header in one (checkOverrides).
	out.Trailer = nil
	out.Close = false
	if req.Body != http.NoBody {
		out.Body = body
	}

	var resp *http.Response
	var err error
	inline := h.inner != KindHTTPS && req.Body == http.NoBody
	if inline {
		resp, err = h.exchange(ctx, out, dst)
	} else {
		resp, err = h.tr.RoundTrip(out)
	}
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		h.s.log.Debug("forward", zap.String("session", h.peer.session), zap.Error(err))
		name := req.URL.Host
		if name == "" && h.tunnel != nil { // origin-form, inside a tunnel: held to its host
			name = h.tunnel.hostport()
		}
		h.refuse(http.StatusBadGateway, "sandboxd egress proxy: upstream "+name+": "+err.Error()+"\n", "destination_unavailable")
		return false
	}
	defer resp.Body.Close()
	// An origin that closes its connection does not end the client's: the next request gets
	// a new upstream connection.
	keep := !req.Close && req.ProtoAtLeast(1, 1)
	keep, err = h.writeResponse(req, resp, keep)
	if inline && (err != nil || resp.Close) {
		h.dropUpstream() // what is left of its answer cannot be told from the next one
	}
	if err != nil {
		h.s.log.Debug("response", zap.String("session", h.peer.session), zap.Error(err))
		return false
	}
	if !body.eof.Load() {
		// The origin answered without reading the whole body; what is left of it sits in the
		// connection and cannot be told apart from a next request.
		lingerClose(h.c)
		return false
	}
	return keep
}

// writeResponse streams resp to the client, flushing as the origin's bytes arrive so slow
// streams stay live. It reports whether the connection can carry another request.
func (h *httpConn) writeResponse(req *http.Request, resp *http.Response, keep bool) (bool, error) {
	noBody := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.StatusCode < 200
	chunked := false
	if resp.StatusCode < 200 {
		keep = false // a 101 switch despite the dropped Upgrade header: nothing sane follows
	}
	removeHopHeaders(resp.Header)
	if !noBody {
		switch {
		case resp.ContentLength >= 0:
			resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		case req.ProtoAtLeast(1, 1):
			chunked = true
			resp.Header.Set("Transfer-Encoding", "chunked")
		default:
			keep = false // an HTTP/1.0 client learns the end of an unsized body by the close
		}
	}
	if !keep {
		resp.Header.Set("Connection", "close")
	}
	reason := strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode)+" ")
	if reason == "" || reason == resp.Status {
		reason = http.StatusText(resp.StatusCode)
	}
	fmt.Fprintf(h.bw, "HTTP/1.1 %03d %s\r\n", resp.StatusCode, reason)
	if err := resp.Header.Write(h.bw); err != nil {
		return false, fmt.Errorf("write response header: %w", err)
	}
	_, _ = h.bw.WriteString("\r\n")
	if noBody || resp.ContentLength == 0 {
		if err := h.bw.Flush(); err != nil {
			return false, fmt.Errorf("write response header: %w", err)
		}
		return keep, nil
	}
	if resp.ContentLength < 0 {
		// An unsized body is often a live stream: the client should see the header now, not
		// with the first chunk whenever it comes.
		if err := h.bw.Flush(); err != nil {
			return false, fmt.Errorf("write response header: %w", err)
		}
	}
	buf := newCopyBuf()
	defer buf.release()
	var written int64
	for {
		n, rerr := resp.Body.Read(buf.bytes())
		if n > 0 {
			written += int64(n)
			if chunked {
				_, _ = h.bw.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n")
			}
			_, _ = h.bw.Write(buf.bytes()[:n])
			if chunked {
				_, _ = h.bw.WriteString("\r\n")
			}
			if err := h.bw.Flush(); err != nil {
				return false, fmt.Errorf("write response body: %w", err)
			}
			buf.filled(n)
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			// The client cannot be told mid-body; ending the connection is the signal. The
			// header still goes first (a sized body keeps it buffered until the first bytes),
			// so the client reads one answer cut short, not a connection closed on nothing.
			_ = h.bw.Flush()
			return false, fmt.Errorf("read upstream body after %d bytes: %w", written, rerr)
		}
	}
	if chunked {
		_, _ = h.bw.WriteString("0\r\n\r\n")
		if err := h.bw.Flush(); err != nil {
			return false, fmt.Errorf("write response body: %w", err)
		}
	}
	return keep, nil
}
