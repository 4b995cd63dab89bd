package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/session"
)

// Input is a call's decoded JSON object.
type Input map[string]any

// String returns in[key] if it is a string.
func (in Input) String(key string) string {
	s, _ := in[key].(string)
	return s
}

// Int returns in[key] as an integer, or def when absent or not a number.
func (in Input) Int(key string, def int64) int64 {
	switch v := in[key].(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
	case float64:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	}
	return def
}

// Bool returns in[key] if it is a bool.
func (in Input) Bool(key string) bool {
	b, _ := in[key].(bool)
	return b
}

// Has reports whether key is present.
func (in Input) Has(key string) bool {
	_, ok := in[key]
	return ok
}

// Clone copies the top level, so backfill never changes the original.
func (in Input) Clone() Input {
	out := make(Input, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// Call is one tool call on its way through the pipeline.
type Call struct {
	Tool      *Tool
	ToolUseID string
	// Original is the input exactly as the client sent it, for the record.
	Original json.RawMessage
	// Input is the decoded input, backfilled by step 6.
	Input   Input
	Session *session.Session
	Caller  session.Caller
	// Mode is the mode this call is decided in: the session's, or one the call carries.
	Mode permission.Mode
	// RunReadOnly is set when the call was allowed because it only reads (plan mode's calls
	// too): its child gets no writable mount but its private /tmp.
	RunReadOnly bool
	// Approved is set when the call ran because its ask was answered allow (a person, or a
	// PermissionRequest hook answering for one): WebFetch's network step honours that answer
	// for the request that was asked about.
	Approved bool
	// room is Request.Room.
	room func() int64
	// narrowings is the session's count of narrowings (session.Narrowings) before the
	// decision: a command started after a later one is stopped at once.
	narrowings uint64
	// read is what a Read call's facts resolved (readFacts): Run opens exactly that file.
	read *readDecision
	// searched is what a Grep call's facts resolved (grepFacts): Run searches exactly that.
	searched *searchDecision
	// autoAllowed is set when auto mode's stages allowed the call (an ask they resolved).
	autoAllowed bool
	// ruleLinks are the links at the starts of the session's deny and ask path rules when the
	// call was decided (Host.ruleLinks): a search it runs holds those rules where they lead.
	ruleLinks []ruleLink
	// decidedWrite is where a Write or Edit call's facts resolved its path (pathFacts): Run
	// writes there or nowhere.
	decidedWrite string
	// bashWrites are the paths a Bash call's facts show it writing (bashFacts): what a person
	// approving the call saw it write, and where the decision found each leads.
	bashWrites []decidedPath
	// bashNamed are the paths a Bash call's facts name, as given and as resolved: the ask
	// rules' paths among them are what a person approving it saw it reach.
	bashNamed []string
	// Bash is the classification of a Bash command, started early (step 5).
	bash       chan *classifier.Classification
	bashResult *classifier.Classification
	// host gives tools the daemon's services (sandbox, workers, state).
	host *Host
	// unconfined: the caller runs this call itself, outside any sandbox (Request.Unconfined):
	// its paths are decided where its own process will find them (Host.resolveFor).
	unconfined bool
}

// decidedPath is a path a call names and where its decision resolved it (PathFact).
type decidedPath struct{ requested, resolved string }

// Classification waits for the early Bash classification of this call.
func (c *Call) Classification() *classifier.Classification {
	if c.bashResult == nil && c.bash != nil {
		c.bashResult = <-c.bash
	}
	return c.bashResult
}

// Block is one piece of content for the model.
type Block struct {
	Type      string `json:"type"` // "text" or "image"
	Text      string `json:"text,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"` // base64, for images
}

// ContextChange is a change a call makes to its session for the calls after it.
type ContextChange struct {
	Mode *permission.Mode `json:"mode,omitempty"`
	Cwd  *string          `json:"cwd,omitempty"`
	// PlanFrom is EnterPlanMode's: the mode left for plan mode (session.Update.PlanFrom).
	PlanFrom *permission.Mode `json:"-"`
}

// Result is what a tool returns.
type Result struct {
	Content []Block        `json:"content"`
	Data    map[string]any `json:"data,omitempty"`
	IsError bool           `json:"is_error"`
	// ExtraMessages are notes for the agent beside the result (e.g. "file changed since read").
	ExtraMessages []string       `json:"extra_messages,omitempty"`
	ContextChange *ContextChange `json:"context_change,omitempty"`
}

// Text returns a Result with one text block.
func Text(s string) *Result { return &Result{Content: []Block{{Type: "text", Text: s}}} }

// TextChars counts the characters of the result's text content.
func (r *Result) TextChars() int {
	n := 0
	for _, b := range r.Content {
		n += len([]rune(b.Text))
	}
	return n
}

// Event is one progress event of a running call, streamed to clients that ask for it.
type Event struct {
	Kind string `json:"kind"` // "stdout", "stderr", "status"
	Data string `json:"data"`
	B64  string `json:"b64,omitempty"` // protocol.Event.B64
}

// Progress receives a running call's events.
type Progress func(Event)

// schemaError turns a validation error into one that names the field and what is wrong.
func schemaError(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("input does not match the schema: %w", err)
	}
	var msgs []string
	for _, leaf := range leaves(ve) {
		field := "/" + strings.Join(leaf.InstanceLocation, "/")
		if field == "/" {
			field = "(input)"
		}
		msgs = append(msgs, fmt.Sprintf("%s: %s", field, leaf.ErrorKind.LocalizedString(englishPrinter)))
	}
	return &SchemaError{Fields: msgs}
}

func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// SchemaError is an input that does not match its tool's schema.
type SchemaError struct {
	Fields []string
	// Hint is added for deferred tools whose schema the client may not have loaded.
	Hint string
}

func (e *SchemaError) Error() string {
	msg := "input does not match the schema: " + strings.Join(e.Fields, "; ")
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

var englishPrinter = message.NewPrinter(language.English)

// decidedWriteOf is where the call's decision found a path it writes leads; "" for one its
// facts do not show.
func (c *Call) decidedWriteOf(path string) string {
	for _, w := range c.bashWrites {
		if w.requested == path {
			return w.resolved
		}
	}
	return ""
}
