package daemon

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// TestEgressPackageRegistries: a session in network mode proxy installs with npm and
// downloads with pip from a registry its rules allow (served on loopback, as a company mirror
// would be), while the same registry under a name no rule allows is refused, and every
// connection is in the audit log.
func TestEgressPackageRegistries(t *testing.T) {
	for _, tool := range [][]string{{"npm", "--version"}, {"python3", "-m", "pip", "--version"}} {
		if err := exec.Command(tool[0], tool[1:]...).Run(); err != nil {
			t.Skipf("%s is not installed here (%v): the registry test needs it", strings.Join(tool, " "), err)
		}
	}
	tgz, whl := npmTarball(t, "tiny", "1.0.0"), pyWheel(t, "tiny", "1.0")
	var fetched atomic.Int64
	var port int
	mux := http.NewServeMux()
	// npm: a packument naming the tarball, with its digests.
	mux.HandleFunc("GET /tiny", func(w http.ResponseWriter, r *http.Request) {
		sum1, sum512 := sha1.Sum(tgz), sha512.Sum512(tgz)
		doc := map[string]any{"name": "tiny", "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{"name": "tiny", "version": "1.0.0", "dist": map[string]string{
				"tarball":   fmt.Sprintf("http://%s/tiny/-/tiny-1.0.0.tgz", r.Host),
				"shasum":    hex.EncodeToString(sum1[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
			}}}}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("GET /tiny/-/tiny-1.0.0.tgz", func(w http.ResponseWriter, _ *http.Request) {
		fetched.Add(1)
		w.Write(tgz)
	})
	// pip: a PEP 503 simple index and the wheel.
	mux.HandleFunc("GET /simple/tiny/", func(w http.ResponseWriter, _ *http.Request) {
		sum := sha256.Sum256(whl)
		fmt.Fprintf(w, `<html><body><a href="/files/tiny-1.0-py3-none-any.whl#sha256=%x">tiny-1.0-py3-none-any.whl</a></body></html>`, sum)
	})
	mux.HandleFunc("GET /files/tiny-1.0-py3-none-any.whl", func(w http.ResponseWriter, _ *http.Request) {
		fetched.Add(1)
		w.Write(whl)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	port = srv.Listener.Addr().(*net.TCPAddr).Port

	td := startDaemon(t, "network:\n  allow_private_cidrs: [127.0.0.0/8]\n")
	td.d.core.egress.srv.Resolver = testResolver{}
	dir := testHostDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"bypassPermissions","network":"proxy","rules":{"allow":["WebFetch(domain:mirror.test)"]}}`, dir))
	run := func(cmd string) string {
		t.Helper()
		_, res := td.call(t, s.ID, "Bash", fmt.Sprintf(`{"command":%q,"timeout":300000}`, cmd))
		return fmt.Sprint(res.Data["stdout"]) + fmt.Sprint(res.Data["stderr"]) + fmt.Sprintf(" exit=%v", res.Data["exit_code"])
	}
	npm := func(host, prefix string) string {
		return fmt.Sprintf("npm install --no-audit --no-fund --no-package-lock --cache ./npm-cache --prefix %s --registry http://%s:%d/ tiny", prefix, host, port)
	}
	pip := func(host, into string) string {
		return fmt.Sprintf("python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check --trusted-host %s --index-url http://%s:%d/simple -d %s tiny", host, host, port, into)
	}
	for _, tc := range []struct{ name, cmd, want string }{
		{"npm install from the allowed mirror", npm("mirror.test", "a") + " && cat a/node_modules/tiny/package.json", `"version": "1.0.0"`},
		{"pip download from the allowed mirror", pip("mirror.test", "wheels") + " && ls wheels", "tiny-1.0-py3-none-any.whl"},
		{"npm from a name no rule allows", npm("other.test", "b") + "; ls b/node_modules/tiny 2>&1", "No such file"},
		{"pip from a name no rule allows", pip("other.test", "w2") + "; ls w2/*.whl 2>&1", "No such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out := run(tc.cmd); !strings.Contains(out, tc.want) {
				t.Errorf("%s:\n%s\nwant %q in it", tc.cmd, out, tc.want)
			}
		})
	}
	if n := fetched.Load(); n != 2 {
		t.Errorf("the mirror served %d packages, want 2 (one per tool, none through a refused name)", n)
	}
	hosts := map[string]map[string]int{"true": {}, "false": {}}
	for _, r := range auditRecords(t, td) {
		if r.Kind == "net.connect" && r.Session == s.ID {
			hosts[r.Detail["allowed"]][r.Detail["host"]]++
		}
	}
	if hosts["true"]["mirror.test"] < 4 || hosts["false"]["other.test"] < 2 || hosts["true"]["other.test"] != 0 {
		t.Errorf("net.connect records by verdict and host: %v", hosts)
	}
}

// npmTarball is an npm package tarball: package/package.json.
func npmTarball(t *testing.T, name, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	pkg := fmt.Sprintf("{\n  \"name\": %q,\n  \"version\": %q\n}\n", name, version)
	if err := tw.WriteHeader(&tar.Header{Name: "package/package.json", Mode: 0o644, Size: int64(len(pkg))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(pkg))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pyWheel is a minimal pure-Python wheel (PEP 427) whose metadata names it.
func pyWheel(t *testing.T, name, version string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	info := fmt.Sprintf("%s-%s.dist-info/", name, version)
	files := map[string]string{
		name + "/__init__.py": "",
		info + "METADATA":     fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", name, version),
		info + "WHEEL":        "Wheel-Version: 1.0\nGenerator: sandboxd-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var record strings.Builder
	for _, n := range []string{name + "/__init__.py", info + "METADATA", info + "WHEEL"} {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[n]))
		sum := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(sum[:]), len(files[n]))
	}
	fmt.Fprintf(&record, "%sRECORD,,\n", info)
	w, err := zw.Create(info + "RECORD")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
