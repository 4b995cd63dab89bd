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
// A batch reaches the SDK as its messages, one a line, and its answer is written by the
// returned writer, which the SDK must write to in place of out (see batcher). What is wrong
// with a line is logged to logw.
func screenLines(in io.Reader, out io.Writer, logw io.Writer) (io.Reader, io.Writer) {
	pr, pw := io.Pipe()
	b := &batcher{out: out}
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		sc := screener{batches: b}
		for {
			line, tooLong, err := readLine(br)
			if len(bytes.TrimSpace(line)) > 0 || tooLong {
				pass, reply, why := sc.screen(line, tooLong)
				if why != "" {
					fmt.Fprintf(logw, "sbctl mcp: refused a message from the client: %s\n", why)
				}
				if reply != nil {
					if _, werr := out.Write(reply); werr != nil {
						pw.CloseWithError(werr)
						return
					}
				}
				for _, m := range pass {
					if _, werr := pw.Write(append(m, '\n')); werr != nil {
						return // the server stopped reading
					}
				}
			}
			if err != nil {
				pw.CloseWithError(err) // io.EOF ends the session as the client closing does
				return
			}
		}
	}()
	return pr, b
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
	// batches answers the batches the screener passes on.
	batches *batcher
}

// batchVersions are the protocol versions with JSON-RPC batches.
var batchVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true}

// screen returns the messages of a line to pass on to the SDK, one a line; the reply to
// write to the client at once, if any; and why the line or a message of it was refused, if
// it was.
func (sc *screener) screen(line []byte, tooLong bool) (pass [][]byte, reply []byte, why string) {
	switch {
	case tooLong:
		reply, why = errorReply(nil, codeInvalidRequest, fmt.Sprintf("message longer than %d bytes", maxLineBytes))
		return nil, reply, why
	case !json.Valid(line):
		reply, why = errorReply(nil, codeParseError, "Parse error: not JSON")
		return nil, reply, why
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' {
		return sc.screenBatch(trimmed)
	}
	msg, err := jsonrpc.DecodeMessage(trimmed)
	if err != nil {
		reply, why = errorReply(idOf(trimmed), codeInvalidRequest, "Invalid Request: "+err.Error())
		return nil, reply, why
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		// A response is matched to its request by id alone: passed on, a request reusing the
		// id of one not yet answered (a batch's, or another line's) would have its response
		// taken for that one's, or take that one's. Its error carries no id, which would name
		// the request still running.
		if sc.batches.waiting(req.ID) {
			reply, why = errorReply(nil, codeInvalidRequest, idInUse)
			return nil, reply, why
		}
		// Before the SDK reads it, so that its response is seen leaving.
		sc.batches.expect(req.ID)
	}
	sc.note(msg)
	return [][]byte{trimmed}, nil, "" // the SDK ends the session on white space after a message
}

// idInUse refuses a request whose id is that of a request on this connection not yet answered.
const idInUse = "Invalid Request: id already in use by a request not yet answered"

// screenBatch screens a batch. The SDK is handed its messages one a line, not the batch:
// go-sdk v1.8.0 waits for a response to every request of a batch before it answers it, and
// counts a notification as a request (one with no id), so a batch holding one was never
// answered and its requests hung. The batcher puts the SDK's responses back together. An
// element that is no message is answered in the batch's reply, and the rest still run, as
// JSON-RPC 2.0 has it.
func (sc *screener) screenBatch(line []byte) (pass [][]byte, reply []byte, why string) {
	if sc.noBatches {
		reply, why = errorReply(nil, codeInvalidRequest, "Invalid Request: this protocol version has no batches; send each message on a line of its own")
		return nil, reply, why
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(line, &elems); err != nil || len(elems) == 0 {
		reply, why = errorReply(nil, codeInvalidRequest, "Invalid Request: an empty batch")
		return nil, reply, why
	}
	bt := &batch{slot: map[jsonrpc.ID]int{}}
	for _, m := range elems {
		msg, err := jsonrpc.DecodeMessage(m)
		if err != nil {
			var r json.RawMessage
			r, why = errorObject(idOf(m), codeInvalidRequest, "Invalid Request in a batch: "+err.Error())
			bt.replies = append(bt.replies, r)
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			// The SDK's response is matched to its request by id alone: an id already
			// waiting for one would take the other request's response.
			if _, dup := bt.slot[req.ID]; dup || sc.batches.waiting(req.ID) {
				var r json.RawMessage
				r, why = errorObject(nil, codeInvalidRequest, idInUse)
				bt.replies = append(bt.replies, r)
				continue
			}
			bt.slot[req.ID] = len(bt.replies)
			bt.replies = append(bt.replies, nil)
		}
		// An initialize in a batch decides as one alone does: the SDK never sees a batch
		// now, so its own refusal of them under 2025-06-18 no longer applies.
		sc.note(msg)
		pass = append(pass, m)
	}
	switch {
	case len(bt.slot) > 0:
		// Before the SDK reads any of it, so that no response gets past the batcher.
		sc.batches.add(bt)
	case len(bt.replies) > 0:
		reply = append(bt.join(), '\n')
	}
	return pass, reply, why
}

// note remembers the protocol version the client asks for when msg is its initialize.
func (sc *screener) note(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		sc.noBatches = !batchVersions[p.ProtocolVersion]
	}
}

// batcher is the writer the SDK writes its messages to. A response to a request of a batch
// is held until every request of that batch is answered, and the batch's responses then go
// to out as one array, as JSON-RPC 2.0 answers a batch. Everything else goes to out as it is
// written.
type batcher struct {
	out io.Writer

	mu sync.Mutex
	// pending is the batch of each request still waiting for the SDK's response.
	pending map[jsonrpc.ID]*batch
	// single is each request sent alone still waiting for the SDK's response: its id is not
	// free for another request until then.
	single map[jsonrpc.ID]bool
}

// batch is the reply to one batch, as it fills.
type batch struct {
	// replies is the reply's elements in the batch's order; a request's is nil until the SDK
	// answers it.
	replies []json.RawMessage
	// slot is where each request's response goes in replies.
	slot map[jsonrpc.ID]int
}

// join is the batch's reply: a JSON array of its elements.
func (bt *batch) join() []byte {
	out := []byte{'['}
	for i, r := range bt.replies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, r...)
	}
	return append(out, ']')
}

func (b *batcher) add(bt *batch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[jsonrpc.ID]*batch{}
	}
	for id := range bt.slot {
		b.pending[id] = bt
	}
}

// expect notes a request sent alone, now on its way to the SDK.
func (b *batcher) expect(id jsonrpc.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.single == nil {
		b.single = map[jsonrpc.ID]bool{}
	}
	b.single[id] = true
}

// waiting reports whether a request with id, alone or in a batch, is not yet answered.
func (b *batcher) waiting(id jsonrpc.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending[id] != nil || b.single[id]
}

// Write takes one whole message, as the SDK writes each.
func (b *batcher) Write(p []byte) (int, error) {
	reply, held := b.hold(p)
	if !held {
		return b.out.Write(p)
	}
	if reply != nil {
		if _, err := b.out.Write(append(reply, '\n')); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// hold keeps p if it answers a request of a batch, and returns the batch's reply when p was
// the last of its responses. A response to a request sent alone frees its id, before the
// client can read it and send the id again.
func (b *batcher) hold(p []byte) (reply []byte, held bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 && len(b.single) == 0 {
		return nil, false // no request waits: not worth decoding what the SDK writes
	}
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(p))
	resp, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return nil, false
	}
	if b.single[resp.ID] {
		delete(b.single, resp.ID)
		return nil, false
	}
	bt := b.pending[resp.ID]
	if bt == nil {
		return nil, false
	}
	delete(b.pending, resp.ID)
	// A writer must not keep p.
	bt.replies[bt.slot[resp.ID]] = bytes.Clone(bytes.TrimSpace(p))
	delete(bt.slot, resp.ID)
	if len(bt.slot) > 0 {
		return nil, true
	}
	return bt.join(), true
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
	b, message := errorObject(id, code, message)
	return append(b, '\n'), message
}

// errorObject is a JSON-RPC error response.
func errorObject(id any, code int, message string) (json.RawMessage, string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": message}})
	return b, message
}
