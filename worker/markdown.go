package worker

import (
	"fmt"

	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2"
	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// MarkdownReply answers OpMarkdown; the Markdown is the payload.
type MarkdownReply struct {
	HTMLBytes int `json:"html_bytes"`
}

// doMarkdown converts a fetched page's HTML to Markdown. It runs here, as the session's owner
// and in its cgroup, not in the daemon: a page built to be expensive (a 10 MB list costs the
// converter about 900 MB and 6 s) then costs its owner's limits, not the root daemon's memory.
// domain (scheme://host) makes the page's relative links absolute.
func doMarkdown(html []byte, domain string) (*MarkdownReply, []byte, error) {
	md, err := htmltomarkdown.ConvertString(string(html), converter.WithDomain(domain))
	if err != nil {
		return nil, nil, errcode.New(errcode.ToolFailed, fmt.Errorf("convert the HTML to Markdown: %w", err))
	}
	return &MarkdownReply{HTMLBytes: len(html)}, []byte(md), nil
}
