package executor

import (
	"context"
	"net/url"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

func TestWebFetchURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, upgraded, plain string // "" in upgraded: refused
	}{
		{"http://docs.example.com/a?b=1#frag", "https://docs.example.com/a?b=1", "http://docs.example.com/a?b=1"},
		{"http://docs.example.com:80/a", "https://docs.example.com/a", "http://docs.example.com:80/a"},
		{"http://docs.example.com:8080/a", "https://docs.example.com:8080/a", "http://docs.example.com:8080/a"},
		{"https://Docs.Example.COM./x", "https://Docs.Example.COM./x", "https://Docs.Example.COM./x"},
		{"http://93.184.216.34/", "https://93.184.216.34/", "http://93.184.216.34/"},
		{"http://[2001:db8::1]/", "https://[2001:db8::1]/", "http://[2001:db8::1]/"},
		{"http://localhost/", "", ""},
		{"http://a.localhost/", "", ""},
		{"http://intranet/", "", ""},
		{"ftp://docs.example.com/", "", ""},
		{"http://user:pw@docs.example.com/", "", ""},
		{"docs.example.com/a", "", ""},
		{"http://docs.example.com:0/", "", ""},
		{"http://docs.example.com/" + string(make([]byte, 2100)), "", ""},
		// Spellings a fetcher reads as an address no rule names.
		{"http://0xa9.0xfe.0xa9.0xfe/", "", ""},
		{"http://169.254.43518/", "", ""},
		{"http://[64:ff9b::a9fe:a9fe]/", "", ""},
		{"http://[2002:a9fe:a9fe::1]/", "", ""},
		{"http://*.example.com/", "", ""},
		{"http://bücher.example/", "", ""},
	} {
		for _, plain := range []bool{false, true} {
			want := tc.upgraded
			if plain {
				want = tc.plain
			}
			h := &Host{WebFetch: WebFetchNet{PlainHTTP: func() bool { return plain }}}
			c := &Call{Input: Input{"url": tc.in, "prompt": ""}}
			err := validateWebFetch(context.Background(), c)
			if err == nil {
				err = h.backfillWebFetch(c)
			}
			switch {
			case want == "" && (err == nil || errcode.Of(err) != errcode.Validation):
				t.Errorf("%q (plain %v): accepted as %q (%v), want a validation error", tc.in, plain, c.Input.String("url"), err)
			case want != "" && err != nil:
				t.Errorf("%q (plain %v): %v", tc.in, plain, err)
			case want != "" && c.Input.String("url") != want:
				t.Errorf("%q (plain %v): fetched as %q, want %q", tc.in, plain, c.Input.String("url"), want)
			}
		}
	}
}

// TestWebFetchFacts: the path is the one the request carries, dot segments and all; the rules'
// matcher reads them (permission.MatchWeb).
func TestWebFetchFacts(t *testing.T) {
	t.Parallel()
	f, err := webFetchFacts(context.Background(), &Call{Input: Input{"url": "https://Git.Example.COM./org/r.git/x/../git-upload-pack"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Domain != "git.example.com" || f.HTTP == nil || f.HTTP.Method != "GET" || f.HTTP.Path != "/org/r.git/x/../git-upload-pack" {
		t.Errorf("facts %+v %+v", f, f.HTTP)
	}
	// An address is the rules' in the form the proxy checks and rules name it in.
	f, err = webFetchFacts(context.Background(), &Call{Input: Input{"url": "http://[::ffff:169.254.169.254]/"}})
	if err != nil || f.Domain != "169.254.169.254" {
		t.Errorf("facts of a mapped address: %+v, %v; want the domain 169.254.169.254", f, err)
	}
}

func TestWebFetchSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"https://x.com/a", "https://x.com/b", true},
		{"https://x.com/a", "https://X.com./b", true},
		{"http://x.com/a", "https://x.com/b", true},
		{"https://x.com/a", "http://x.com/b", false}, // never a downgrade
		{"https://x.com/a", "https://x.com:8443/b", false},
		{"https://x.com/a", "https://www.x.com/b", false},
		{"https://x.com/a", "https://x.com.evil.net/b", false},
		{"http://x.com:8080/a", "https://x.com:8080/b", false},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := sameOrigin(a, b); got != tc.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestTextual(t *testing.T) {
	t.Parallel()
	for mt, want := range map[string]bool{
		"text/plain": true, "text/markdown": true, "application/json": true, "application/vnd.api+json": true,
		"image/png": false, "application/octet-stream": false, "application/pdf": false, "": false,
	} {
		if textual(mt) != want {
			t.Errorf("textual(%q) = %v", mt, !want)
		}
	}
}
