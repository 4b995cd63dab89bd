package daemon

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/protocol"
)

// webSite is a small site on the host's loopback; it counts what it served per host and path,
// so a test can tell a request the policy stopped from one that never reached it.
type webSite struct {
	mu   sync.Mutex
	hits map[string]int
}

func (w *webSite) count(host, path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hits[host+path]
}

func (w *webSite) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(rw, `<!doctype html><html><head><title>T</title><script>stealCookies()</script></head>
<body><h1>Release notes</h1><p>Version <b>2.0</b> is out. See <a href="/docs/install">the install guide</a>.</p>
<ul><li>faster</li><li>safer</li></ul></body></html>`)
	})
	mux.HandleFunc("/moved", func(rw http.ResponseWriter, r *http.Request) { http.Redirect(rw, r, "/page", http.StatusFound) })
	mux.HandleFunc("/away", func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, "http://other.test:"+portOfHost(r.Host)+"/page", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/to-private", func(rw http.ResponseWriter, r *http.Request) { http.Redirect(rw, r, "/private/key", http.StatusFound) })
	mux.HandleFunc("/private/", func(rw http.ResponseWriter, _ *http.Request) { io.WriteString(rw, "the private key\n") })
	mux.HandleFunc("/big", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		io.WriteString(rw, strings.Repeat("0123456789abcdef\n", 12000))
	})
	mux.HandleFunc("/image", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "image/png")
		rw.Write([]byte("\x89PNG\r\n\x1a\n....."))
	})
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.Host)
		w.mu.Lock()
		w.hits[host+r.URL.Path]++
		w.mu.Unlock()
		mux.ServeHTTP(rw, r)
	})
}

func portOfHost(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

// TestWebFetch: the WebFetch tool fetches through the session's egress policy, as a proxied
// program would: an allowed page comes back as Markdown, a host no rule allows is refused with
// the reason, a redirect to another host is reported and not followed, a same-host redirect is
// followed but decided again (a method/path deny stops it), an approval answers an ask, HTTPS is
// decided by the request WebFetch declares, and every step is in the audit log.
func TestWebFetch(t *testing.T) {
	site := &webSite{hits: map[string]int{}}
	srv := httptest.NewServer(site.handler())
	defer srv.Close()
	tlsSrv, roots := tlsTestServer(t, site.handler(), "tls.test")
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tlsPort := tlsSrv.Listener.Addr().(*net.TCPAddr).Port

	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n  webfetch_plain_http: true\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	// The daemon trusts the TLS test server's CA only here.
	td.d.core.host.WebFetch.TLS = &tls.Config{RootCAs: roots}

	dir := testHostDir(t)
	// network none: the session's programs have no way out; WebFetch is governed by the rules.
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"dontAsk","rules":{
		"allow":["WebFetch(domain:docs.test)","WebFetch(GET tls.test/**)"],
		"deny":["WebFetch(GET docs.test/private/**)","WebFetch(* tls.test/private/**)"]}}`, dir))
	if s.Network != "none" {
		t.Fatalf("session network %q", s.Network)
	}
	fetch := func(sid, url string) protocol.CallResult {
		t.Helper()
		_, res := td.call(t, sid, "WebFetch", fmt.Sprintf(`{"url":%q,"prompt":"what changed?"}`, url))
		return res
	}
	text := func(res protocol.CallResult) string {
		var b strings.Builder
		for _, c := range res.Content {
			b.WriteString(c.Text)
		}
		return b.String()
	}
	at := func(host, p string) string { return fmt.Sprintf("http://%s:%d%s", host, port, p) }

	t.Run("allowed page as markdown", func(t *testing.T) {
		res := fetch(s.ID, at("docs.test", "/page"))
		out := text(res)
		for _, want := range []string{"# Release notes", "Version **2.0** is out", fmt.Sprintf("[the install guide](http://docs.test:%d/docs/install)", port), "- faster", "The prompt was not run"} {
			if !strings.Contains(out, want) {
				t.Errorf("want %q in:\n%s", want, out)
			}
		}
		if res.IsError || strings.Contains(out, "stealCookies") || fmt.Sprint(res.Data["code"]) != "200" {
			t.Errorf("result: error %v, data %v:\n%s", res.IsError, res.Data, out)
		}
	})
	t.Run("host not allowed", func(t *testing.T) {
		res := fetch(s.ID, at("other.test", "/page"))
		if !res.IsError || behavior(res) != permission.Deny || site.count("other.test", "/page") != 0 {
			t.Errorf("other.test was not refused: %+v %s", res.Decision, text(res))
		}
	})
	t.Run("cross-host redirect reported", func(t *testing.T) {
		res := fetch(s.ID, at("docs.test", "/away"))
		out := text(res)
		if res.IsError || !strings.Contains(out, "REDIRECT NOT FOLLOWED") || !strings.Contains(out, at("other.test", "/page")) {
			t.Errorf("redirect: %s", out)
		}
		if n := site.count("other.test", "/page"); n != 0 {
			t.Errorf("the redirect to other.test was followed (%d hits)", n)
		}
	})
	t.Run("same-host redirect followed", func(t *testing.T) {
		if out := text(fetch(s.ID, at("docs.test", "/moved"))); !strings.Contains(out, "# Release notes") {
			t.Errorf("moved: %s", out)
		}
	})
	t.Run("method/path deny", func(t *testing.T) {
		res := fetch(s.ID, at("docs.test", "/private/key"))
		if behavior(res) != permission.Deny || res.Decision.Rule != "WebFetch(GET docs.test/private/**)" {
			t.Errorf("private: %+v %s", res.Decision, text(res))
		}
		// A same-host redirect into the denied path: the tool allowed /to-private, the proxy
		// refuses the second hop by the same rule.
		res = fetch(s.ID, at("docs.test", "/to-private"))
		if out := text(res); !res.IsError || !strings.Contains(out, "WebFetch(GET docs.test/private/**)") || strings.Contains(out, "private key") {
			t.Errorf("redirect into a denied path: %s", out)
		}
		if n := site.count("docs.test", "/private/key"); n != 0 {
			t.Errorf("the denied path was served %d times", n)
		}
	})
	t.Run("https by the declared request", func(t *testing.T) {
		// Only a method/path allow names tls.test: a program's tunnel there is refused, but
		// WebFetch builds its request itself, so its tunnel is decided by GET and the path.
		url := fmt.Sprintf("https://tls.test:%d/page", tlsPort)
		if res := fetch(s.ID, url); res.IsError || !strings.Contains(text(res), "# Release notes") {
			t.Errorf("https: %+v %s", res.Decision, text(res))
		}
		res := fetch(s.ID, fmt.Sprintf("https://tls.test:%d/to-private", tlsPort))
		if out := text(res); !res.IsError || !strings.Contains(out, "WebFetch(* tls.test/private/**)") {
			t.Errorf("https redirect into a denied path: %s", out)
		}
		if n := site.count("tls.test", "/private/key"); n != 0 {
			t.Errorf("the denied https path was served %d times", n)
		}
	})
	t.Run("oversize result persisted", func(t *testing.T) {
		res := fetch(s.ID, at("docs.test", "/big"))
		if p, _ := res.Data["persistedOutputPath"].(string); p == "" || !strings.Contains(text(res), "persisted-output") {
			t.Errorf("a 200 KB page was not persisted: data %v", res.Data)
		}
	})
	t.Run("binary not shown", func(t *testing.T) {
		if out := text(fetch(s.ID, at("docs.test", "/image"))); !strings.Contains(out, "image/png content of") || strings.Contains(out, "PNG") {
			t.Errorf("image: %s", out)
		}
	})
	t.Run("localhost and dotless refused", func(t *testing.T) {
		for _, u := range []string{fmt.Sprintf("http://localhost:%d/page", port), "http://intranet/page", "ftp://docs.test/x", "http://u:p@docs.test/x"} {
			if res := fetch(s.ID, u); !res.IsError || res.Error == nil || res.Error.Class != "validation" {
				t.Errorf("%s: %+v %s", u, res.Error, text(res))
			}
		}
	})

	t.Run("sbctl fetch", func(t *testing.T) {
		bin := buildSbctl(t)
		out, errOut, code := sbctl(t, bin, td.socket, nil, "fetch", "--session", s.ID, "--prompt", "what changed?", at("docs.test", "/page"))
		if code != 0 || !strings.Contains(out, "# Release notes") || !strings.Contains(errOut, "decision: allow") {
			t.Errorf("sbctl fetch: %d\n%s\n%s", code, out, errOut)
		}
		_, errOut, code = sbctl(t, bin, td.socket, nil, "fetch", "--session", s.ID, at("other.test", "/page"))
		if code == 0 || !strings.Contains(errOut, "deny") {
			t.Errorf("sbctl fetch of a host no rule allows: %d %s", code, errOut)
		}
	})

	// bypassPermissions allows the call; the network still needs a rule, and says so.
	bypass := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions"}`, dir))
	t.Run("network needs a rule", func(t *testing.T) {
		res := fetch(bypass.ID, at("other.test", "/page"))
		if out := text(res); !res.IsError || !strings.Contains(out, "no rule allows other.test") || site.count("other.test", "/page") != 0 {
			t.Errorf("bypass: %+v %s", res.Decision, out)
		}
	})
	// In default mode an unallowed host asks; a person's approval is the allow that fetch
	// lacked, for that request only.
	def := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	t.Run("approval answers the ask", func(t *testing.T) {
		input := fmt.Sprintf(`{"url":%q,"prompt":"p"}`, at("ask.test", "/page"))
		res := td.callRaw(t, def.ID, callBody("WebFetch", input, ""))
		if behavior(res) != permission.Ask || res.ApprovalID == "" {
			t.Fatalf("want an ask: %+v", res.Decision)
		}
		if code, b := td.answer(t, res.ApprovalID, `{"answer":"allow"}`); code != 200 {
			t.Fatalf("answer: %d %s", code, b)
		}
		res = td.callRaw(t, def.ID, callBody("WebFetch", input, fmt.Sprintf(`,"approval_id":%q`, res.ApprovalID)))
		if out := text(res); res.IsError || !strings.Contains(out, "# Release notes") {
			t.Errorf("approved fetch: %+v %s", res.Decision, out)
		}
	})

	// The audit log has each proxy decision of WebFetch, with method, path and rule.
	var allowed, refused, approved, tunnel bool
	for _, r := range auditRecords(t, td) {
		d := r.Detail
		if r.Kind != "net.connect" || d["via"] != "WebFetch" {
			continue
		}
		switch {
		case d["allowed"] == "true" && d["host"] == "docs.test" && d["method"] == "GET" && d["path"] == "/page" && d["rule"] == "WebFetch(domain:docs.test)":
			allowed = true
		case d["allowed"] == "false" && d["host"] == "docs.test" && d["path"] == "/private/key" && d["rule"] == "WebFetch(GET docs.test/private/**)":
			refused = true
		case d["allowed"] == "true" && d["host"] == "ask.test" && d["rule"] == "approval":
			approved = true
		case d["allowed"] == "true" && d["kind"] == "connect" && d["host"] == "tls.test" && d["path"] == "/page" && d["rule"] == "WebFetch(GET tls.test/**)":
			tunnel = true
		}
	}
	if !allowed || !refused || !approved || !tunnel {
		t.Errorf("net.connect records via WebFetch: allowed %v, refused %v, approved %v, tunnel %v", allowed, refused, approved, tunnel)
	}
}

// TestWebFetchConvertsAsOwner: a page built to be expensive to convert (a 10 MB list costs the
// converter about 1 GB of allocations) is converted in the session's worker, as its owner and
// within its limits: the root daemon allocates a small multiple of the page, not the converter's
// cost. Not parallel, so the daemon's allocations are this test's.
func TestWebFetchConvertsAsOwner(t *testing.T) {
	page := "<ul>" + strings.Repeat("<li>x</li>", 1<<20) + "</ul>"
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		io.WriteString(rw, page)
	}))
	defer srv.Close()
	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n  webfetch_plain_http: true\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"dontAsk","rules":{"allow":["WebFetch(domain:list.test)"]}}`, testHostDir(t)))
	url := fmt.Sprintf("http://list.test:%d/", srv.Listener.Addr().(*net.TCPAddr).Port)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, res := td.call(t, s.ID, "WebFetch", fmt.Sprintf(`{"url":%q,"prompt":"list"}`, url))
	runtime.ReadMemStats(&after)
	if res.IsError || !strings.Contains(fmt.Sprint(res.Content), "- x\n- x\n") {
		t.Fatalf("the list did not come back as Markdown: error %v, %.300v", res.IsError, res.Content)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the daemon allocated %d MB for a %d MB page", alloc>>20, len(page)>>20)
	if alloc > 20*uint64(len(page)) {
		t.Errorf("the daemon allocated %d MB for a %d MB page: the conversion ran in the daemon", alloc>>20, len(page)>>20)
	}
}
