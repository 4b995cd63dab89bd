package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
)

const downloadBytes = 200 << 20

// benchOrigin serves /big (200 MB with a Content-Length, from one reused buffer so the origin
// costs little) and /small (two bytes).
func benchOrigin(b *testing.B) *httptest.Server {
	chunk := make([]byte, 256<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			w.Header().Set("Content-Length", "2")
			_, _ = io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(downloadBytes))
		for left := downloadBytes; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

func benchProxy(b *testing.B) string {
	return startProxy(b, &Server{Decide: allowDecide, AllowPrivate: loopback})
}

// writerOnly hides io.Discard's ReadFrom, so a download reads into the caller's buffer.
type writerOnly struct{ io.Writer }

// benchTransport is the same client setup for every path, so the ratio measures the proxy.
func benchTransport(b *testing.B) *http.Transport {
	tr := &http.Transport{DisableCompression: true, ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	b.Cleanup(tr.CloseIdleConnections)
	return tr
}

// connectDialer opens each connection as a CONNECT tunnel through the proxy.
func connectDialer(proxyAddr string) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, _, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", proxyAddr)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", addr, addr)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || resp.StatusCode != 200 || br.Buffered() != 0 {
			c.Close()
			return nil, fmt.Errorf("connect %s: %v %v", addr, resp, err)
		}
		return c, nil
	}
}

func download(b *testing.B, client *http.Client, u string, buf []byte) time.Duration {
	start := time.Now()
	resp, err := client.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.CopyBuffer(writerOnly{io.Discard}, resp.Body, buf)
	resp.Body.Close()
	if err != nil || n != downloadBytes {
		b.Fatalf("downloaded %d bytes: %v", n, err)
	}
	return time.Since(start)
}

// BenchmarkDownload200MB downloads 200 MB directly and through the proxy in every iteration
// and reports both rates and their ratio (goal: proxy ≥ 0.8x direct), for plain HTTP forwarding
// and for a CONNECT tunnel (what HTTPS uses).
func BenchmarkDownload200MB(b *testing.B) {
	origin := benchOrigin(b)
	proxyAddr := benchProxy(b)
	direct := &http.Client{Transport: benchTransport(b)}
	fwdTr := benchTransport(b)
	fwdTr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr})
	tunTr := benchTransport(b)
	tunTr.DialContext = connectDialer(proxyAddr)
	buf := make([]byte, 256<<10)
	for _, tc := range []struct {
		name      string
		client    *http.Client
		smallOnly bool
	}{
		{"forward", &http.Client{Transport: fwdTr}, false},
		{"connect", &http.Client{Transport: tunTr}, false},
		// The A/B for the bulk copy buffers: the same tunnel with every bulk slot taken.
		{"connect-smallbufs", &http.Client{Transport: tunTr}, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.smallOnly {
				// The tunnel the previous row kept alive holds its bulk buffer until it ends.
				tunTr.CloseIdleConnections()
				takeBulkSlots(b)
			}
			var dDirect, dProxy time.Duration
			for b.Loop() {
				dDirect += download(b, direct, origin.URL+"/big", buf)
				dProxy += download(b, tc.client, origin.URL+"/big", buf)
			}
			mb := float64(b.N) * downloadBytes / (1 << 20)
			b.ReportMetric(mb/dDirect.Seconds(), "direct-MB/s")
			b.ReportMetric(mb/dProxy.Seconds(), "proxy-MB/s")
			b.ReportMetric(dDirect.Seconds()/dProxy.Seconds(), "ratio")
		})
	}
}

// BenchmarkSmallRequests makes 1000 sequential small requests on a kept-alive connection,
// directly and through the proxy, in every iteration, and reports the ratio (goal ≥ 0.5x).
func BenchmarkSmallRequests(b *testing.B) {
	origin := benchOrigin(b)
	proxyAddr := benchProxy(b)
	direct := &http.Client{Transport: benchTransport(b)}
	fwdTr := benchTransport(b)
	fwdTr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: proxyAddr})
	proxied := &http.Client{Transport: fwdTr}
	run := func(client *http.Client) time.Duration {
		start := time.Now()
		for range 1000 {
			resp, err := client.Get(origin.URL + "/small")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
		return time.Since(start)
	}
	var dDirect, dProxy time.Duration
	for b.Loop() {
		dDirect += run(direct)
		dProxy += run(proxied)
	}
	n := float64(b.N) * 1000
	b.ReportMetric(n/dDirect.Seconds(), "direct-req/s")
	b.ReportMetric(n/dProxy.Seconds(), "proxy-req/s")
	b.ReportMetric(dDirect.Seconds()/dProxy.Seconds(), "ratio")
}
