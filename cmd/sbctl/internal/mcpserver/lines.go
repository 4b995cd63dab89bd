package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLineBytes bounds one inbound message, as the SDK's own stdio transport does.
const maxLineBytes = mcp.DefaultMaxLineLength

// JSON-RPC 2.0's error codes for what is not a request at all.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// lockedWriter writes whole messages to w one at a time: the SDK writes each of its messages
// with one Write, and screenLines answers the lines it drops on the same stream.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// screenLines passes the MCP client's messages from in to the returned reader, one a line as
// MCP's stdio transport frames them, and answers a line that is not a message the SDK can
// decode with a JSON-RPC error on out, passing it no further: the SDK ends the whole session
// on such a line, and the agent loses its tools for one bad write. Blank lines are skipped.
// What is wrong with a line is logged to logw.
func screenLines(in io.Reader, out io.Writer, logw io.Writer) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		var sc screener
		for {
			line, tooLong, err := readLine(br)
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				if reply, why := sc.screen(line, tooLong); reply != nil {
					fmt.Fprintf(logw, "sbctl mcp: dropped a line from the client: %s\n", why)
					if _, werr := out.Write(reply); werr != nil {
						pw.CloseWithError(werr)
						return
					}
				} else if _, werr := pw.Write(append(line, '\n')); werr != nil {
					return // the server stopped reading
				}
			}
			if err != nil {
				pw.CloseWithError(err) // io.EOF ends the session as the client closing does
				return
			}
		}
	}()
	return pr
}

// readLine reads one line without its newline. A line past maxLineBytes is read to its end
// and thrown away (tooLong), so one huge line costs no more than the bound.
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLineBytes+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
	}
}

// screener remembers what of the session decides which lines the SDK takes.
type screener struct {
	// noBatches is set once the client asked for a protocol version that has no batches
	// (2025-06-18 and later, or one the server does not know and answers with its own).
	noBatches bool
}

// batchVersions are the protocol versions with JSON-RPC batches.
var batchVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true}

// screen returns the error response for a line the SDK would end the session on, and why,
// or nil for a line to pass on.
func (sc *screener) screen(line []byte, tooLong bool) ([]byte, string) {
	switch {
	case tooLong:
		return errorReply(nil, codeInvalidRequest, fmt.Sprintf("message longer than %d bytes", maxLineBytes))
	case !json.Valid(line):
		return errorReply(nil, codeParseError, "Parse error: not JSON")
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' {
		if sc.noBatches {
			return errorReply(nil, codeInvalidRequest, "Invalid Request: this protocol version has no batches; send each message on a line of its own")
		}
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil || len(batch) == 0 {
			return errorReply(nil, codeInvalidRequest, "Invalid Request: an empty batch")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return errorReply(nil, codeInvalidRequest, "Invalid Request in a batch: "+err.Error())
			}
		}
		return nil, ""
	}
	msg, err := jsonrpc.DecodeMessage(trimmed)
	if err != nil {
		return errorReply(idOf(trimmed), codeInvalidRequest, "Invalid Request: "+err.Error())
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		sc.noBatches = !batchVersions[p.ProtocolVersion]
	}
	return nil, ""
}

// idOf is a request's id when it is one JSON-RPC allows (a string or a number), else nil: the
// error answers that request, or no request (id null).
func idOf(msg []byte) any {
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &head) != nil || len(head.ID) == 0 {
		return nil
	}
	var id any
	if json.Unmarshal(head.ID, &id) != nil {
		return nil
	}
	switch id.(type) {
	case string, float64:
		return json.RawMessage(head.ID)
	}
	return nil
}

// errorReply is a JSON-RPC error response line.
func errorReply(id any, code int, message string) ([]byte, string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": message}})
	return append(b, '\n'), message
}
