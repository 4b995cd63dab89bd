package classifier

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Format renders c for humans (`sbctl classify` without --json): the verdict
// and reason, the risks, then one line per subcommand.
func (c *Classification) Format() string {
	var b strings.Builder
	verdict := "not read-only"
	if c.ReadOnly {
		verdict = "read-only"
	}
	fmt.Fprintf(&b, "%s (%s)\n", verdict, c.Reason)
	if c.ParseError != nil {
		fmt.Fprintf(&b, "parse error: %s\n", *c.ParseError)
	}
	if len(c.Risks) > 0 {
		fmt.Fprintf(&b, "risks: %s\n", strings.Join(c.Risks, ", "))
	}
	for i, s := range c.Subcommands {
		mark := "-"
		if s.ReadOnly {
			mark = "+"
		}
		fmt.Fprintf(&b, "%d. %s %q: %s", i+1, mark, s.Text, s.Reason)
		if s.Prefix == nil {
			b.WriteString(" [no allow prefix]")
		} else {
			fmt.Fprintf(&b, " [prefix %q]", strings.Join(s.Prefix, " "))
		}
		if s.ExactOnly {
			b.WriteString(" [exact rules only]")
		}
		if s.Nested {
			b.WriteString(" [nested]")
		}
		if s.Opaque {
			b.WriteString(" [opaque: matches every deny rule]")
		}
		for _, r := range s.Redirects {
			if r.Write {
				fmt.Fprintf(&b, " [writes %s%s]", r.Op, r.Target)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// jsonlError is the line RunJSONL writes for an input line it cannot decode.
type jsonlError struct {
	Error string `json:"error"`
	Line  int    `json:"line"`
}

// maxJSONLLine bounds one input line of RunJSONL.
const maxJSONLLine = 1 << 20

// RunJSONL reads one JSON string per line from r (the command text) and
// writes one JSON Classification per line to w, in order. A line that is not
// a JSON string yields {"error": ..., "line": n} and processing continues;
// only a read or write failure stops it.
func RunJSONL(r io.Reader, w io.Writer, opts Options) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxJSONLLine)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var cmd string
		var out any
		if err := json.Unmarshal([]byte(line), &cmd); err != nil {
			out = jsonlError{Error: "invalid_json_string", Line: n}
		} else {
			out = Classify(cmd, opts)
		}
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("write classification %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		bw.Flush()
		return fmt.Errorf("read line %d: %w", n+1, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("flush classifications: %w", err)
	}
	return nil
}
