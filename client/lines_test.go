package client

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestStreamLinesSkipsOverlongLines: a line past maxLine (an audit record written before
// records were bounded) is skipped and reported, and the lines after it still reach fn.
func TestStreamLinesSkipsOverlongLines(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("first\n" + strings.Repeat("x", maxLine+10) + "\nafter\r\nlast"))
	})}
	go srv.Serve(l)
	defer srv.Close()
	var got []string
	err = New(sock).RawLines(context.Background(), "/x", func(line []byte) error {
		got = append(got, string(line))
		return nil
	})
	if strings.Join(got, ",") != "first,after,last" {
		t.Errorf("lines %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), "1 lines over 16 MiB were skipped") {
		t.Errorf("err %v, want the skip reported", err)
	}
}
