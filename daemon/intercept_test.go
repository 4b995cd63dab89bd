package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/egress"
)

// tlsTestServer serves h over TLS on loopback with a certificate for hosts under a CA of its
// own, which the returned pool trusts.
func tlsTestServer(t *testing.T, h http.Handler, hosts ...string) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	caPEM, caKeyPEM, err := egress.GenerateCA("origin test CA", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(caKeyPEM)
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return srv, pool
}

// TestEgressIntercept: with network.tls_intercept, a proxied session's HTTPS is decided request
// by request: curl, python and git trust the daemon's CA through the environment (a bundle
// with the host's roots, the host's trust store untouched), a GET-only allow refuses a POST
// inside TLS, git clone and fetch over https work while push is refused, and the CA's key is
// hidden from the session, root's included.
func TestEgressIntercept(t *testing.T) {
	mux, bare, posts := gitAndHello(t, "hello over TLS from ")
	srv, pool := tlsTestServer(t, mux, "api.test", "git.test")
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	hostRoots, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n  tls_intercept: true\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	td.d.core.egress.srv.Intercept.Upstream = pool // the proxy verifies the test origin
	if after, _ := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); string(after) != string(hostRoots) {
		t.Fatal("the host's trust store changed")
	}
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","network":"proxy","rules":{
		"allow":["WebFetch(GET api.test/**)","WebFetch(domain:git.test)"],
		"deny":["WebFetch(POST git.test/**/git-receive-pack)"]}}`, dir))
	run := func(cmd string) string {
		t.Helper()
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q}`, cmd))
		return fmt.Sprint(res.Data["stdout"]) + fmt.Sprint(res.Data["stderr"])
	}
	at := func(host, p string) string { return fmt.Sprintf("https://%s:%d%s", host, port, p) }
	keyPath := filepath.Join(td.state, "egress-key", "ca.key")
	if _, err := os.Stat(keyPath); err != nil {
		t.Fatalf("CA key: %v", err)
	}
	for _, tc := range []struct{ name, cmd, want, not string }{
		{"curl get", "curl -sS " + at("api.test", "/hello"), "hello over TLS from api.test", ""},
		{"python get", fmt.Sprintf(`python3 -c 'import urllib.request; print(urllib.request.urlopen(%q).read().decode())'`, at("api.test", "/hello")), "hello over TLS", ""},
		{"curl post refused inside TLS", "curl -sS -d secret " + at("api.test", "/hello"), "denied POST " + at("api.test", "/hello"), "hello over"},
		{"keep-alive inside TLS", "curl -sS " + at("api.test", "/hello") + " --next -sS -X DELETE " + at("api.test", "/hello") + " --next -sS " + at("api.test", "/hello"),
			fmt.Sprintf("hello over TLS from api.test:%d\nsandboxd egress policy denied DELETE", port), ""},
		{"git clone", fmt.Sprintf("git clone -q %s c && git -C c log --oneline | wc -l", at("git.test", "/git/repo.git")), "1", "fatal"},
		{"git push refused", "cd c && git -c user.name=a -c user.email=a@x commit -q --allow-empty -m second && git push -q origin HEAD:main; echo rc=$?", "403", "rc=0"},
		{"git fetch", "git -C c fetch -q origin && echo fetched", "fetched", "fatal"},
		{"the bundle has the host's roots and the CA", `grep -c 'BEGIN CERTIFICATE' "$SSL_CERT_FILE"; test "$NODE_EXTRA_CA_CERTS" != "$SSL_CERT_FILE" && echo two-files`, "two-files", ""},
		// The path is spelled backwards so only the kernel can stop the read: the decision
		// already denies a path it sees under the key's directory.
		{"the CA key is hidden", "cat \"$(echo " + reverse(keyPath) + " | rev)\" >/dev/null 2>&1 || echo hidden", "hidden", "PRIVATE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := run(tc.cmd)
			if !strings.Contains(out, tc.want) || (tc.not != "" && strings.Contains(out, tc.not)) {
				t.Errorf("%s:\n%s\nwant %q in it and not %q", tc.cmd, out, tc.want, tc.not)
			}
		})
	}
	// Java reads neither the proxy variables nor a PEM bundle: JAVA_TOOL_OPTIONS gives it the
	// proxy and the bundle as a PKCS#12 trust store.
	t.Run("java get", func(t *testing.T) {
		if _, err := exec.LookPath("java"); err != nil {
			t.Skip("java is not installed here: the Java trust store is unchecked")
		}
		src := filepath.Join(dir, "Fetch.java")
		if err := os.WriteFile(src, []byte(`public class Fetch { public static void main(String[] a) throws Exception {
	try (var in = new java.net.URL(a[0]).openStream()) { System.out.println(new String(in.readAllBytes())); } } }`), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := run("java " + src + " " + at("api.test", "/hello")); !strings.Contains(out, "hello over TLS from api.test") {
			t.Errorf("java through the intercepting proxy:\n%s", out)
		}
	})
	if n := posts.Load(); n != 0 {
		t.Errorf("the server saw %d POSTs to /hello", n)
	}
	if out, err := exec.Command("git", "-C", bare, "rev-list", "--count", "main").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Errorf("the push reached the server: %s %v", out, err)
	}
	var post, push, start bool
	for _, r := range auditRecords(t, td) {
		d := r.Detail
		switch {
		case r.Kind == "daemon.start" && len(d["egress_ca_sha256"]) == 64:
			start = true
		case r.Kind != "net.connect" || d["kind"] != "https" || d["allowed"] != "false":
		case d["method"] == "POST" && d["path"] == "/hello" && d["host"] == "api.test":
			post = true
		case d["method"] == "POST" && strings.HasSuffix(d["path"], "/git-receive-pack") && d["rule"] == "WebFetch(POST git.test/**/git-receive-pack)":
			push = true
		}
	}
	if !post || !push || !start {
		t.Errorf("audit: https POST %v, push %v, daemon.start with the CA %v", post, push, start)
	}

	// The CA is kept: a restart on the same state directory presents the same one.
	fp := td.d.core.egress.caSHA256
	ca2, _, err := loadInterceptCA(td.state, time.Now())
	if err != nil || ca2.fingerprint != fp {
		t.Errorf("reload of the CA: %v, %s vs %s", err, ca2.fingerprint, fp)
	}
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}
