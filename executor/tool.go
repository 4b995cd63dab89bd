package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandboxd/sandboxd/permission"
)

// Def is what a tool author declares. Everything but Name, Schema and Run is optional, and
// New fills what is left out with the fail-closed choice: not read-only, not
// concurrency-safe, destructive unless it is read-only, enabled, no permission facts.
type Def struct {
	Name        string
	Aliases     []string
	Description string
	// Schema is the JSON Schema of the input object (draft 2020-12).
	Schema string
	// External marks tools that come from MCP servers; they sort after the built-ins.
	External bool

	Enabled         func() bool
	ReadOnly        func(in Input) bool
	ConcurrencySafe func(in Input) bool
	Destructive     func(in Input) bool
	// Validate runs semantic checks after the schema passed (pipeline step 4).
	Validate func(ctx context.Context, c *Call) error
	// Backfill fills derived input (absolute paths, ~) in place (step 6). The original input
	// stays in Call.Original for the record.
	Backfill func(c *Call) error
	// CheckPermissions gathers the tool-specific facts the policy decides on (step 7).
	CheckPermissions func(ctx context.Context, c *Call) (permission.ToolFacts, error)
	// Run executes the call (step 10).
	Run func(ctx context.Context, c *Call, progress Progress) (*Result, error)
	// MaxResultSizeChars is the inline limit; longer results are persisted with a preview.
	// Zero means the executor default; Unbounded means the tool limits itself.
	MaxResultSizeChars int
	// Defer lists the tool by name only until a client asks for its schema (ToolSearch).
	Defer bool
}

// Unbounded is the MaxResultSizeChars of tools that cap their own output (Read).
const Unbounded = -1

// DefaultMaxResultSizeChars applies to tools that declare no limit.
const DefaultMaxResultSizeChars = 30_000

// Tool is a registered tool: a Def with its defaults filled and its schema compiled.
type Tool struct {
	def    Def
	schema *jsonschema.Schema
}

// New validates def, fills its fail-closed defaults and compiles its schema.
func New(def Def) (*Tool, error) {
	if def.Name == "" {
		return nil, fmt.Errorf("tool without a name")
	}
	if def.Run == nil {
		return nil, fmt.Errorf("tool %s: no Run", def.Name)
	}
	if def.Schema == "" {
		def.Schema = `{"type":"object","additionalProperties":false}`
	}
	schema, err := compileSchema(def.Name, def.Schema)
	if err != nil {
		return nil, err
	}
	if def.Enabled == nil {
		def.Enabled = func() bool { return true }
	}
	if def.ReadOnly == nil {
		def.ReadOnly = func(Input) bool { return false }
	}
	if def.ConcurrencySafe == nil {
		def.ConcurrencySafe = func(Input) bool { return false }
	}
	if def.Destructive == nil {
		readOnly := def.ReadOnly
		def.Destructive = func(in Input) bool { return !readOnly(in) }
	}
	if def.MaxResultSizeChars == 0 {
		def.MaxResultSizeChars = DefaultMaxResultSizeChars
	}
	return &Tool{def: def, schema: schema}, nil
}

func compileSchema(name, text string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	url := "sandboxd:///tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tool %s: schema: %w", name, err)
	}
	return s, nil
}

// Name is the canonical name.
func (t *Tool) Name() string { return t.def.Name }

// Aliases are other names the tool answers to.
func (t *Tool) Aliases() []string { return t.def.Aliases }

// Description is the model-facing description.
func (t *Tool) Description() string { return t.def.Description }

// Schema is the input JSON Schema text.
func (t *Tool) Schema() json.RawMessage { return json.RawMessage(t.def.Schema) }

// External reports whether the tool came from an MCP server.
func (t *Tool) External() bool { return t.def.External }

// IsEnabled reports whether the tool may be offered and called now.
func (t *Tool) IsEnabled() bool { return t.def.Enabled() }

// IsReadOnly reports whether this input only reads.
func (t *Tool) IsReadOnly(in Input) bool { return t.def.ReadOnly(in) }

// IsConcurrencySafe reports whether this input may run beside other calls.
func (t *Tool) IsConcurrencySafe(in Input) bool { return t.def.ConcurrencySafe(in) }

// IsDestructive reports whether this input may destroy data.
func (t *Tool) IsDestructive(in Input) bool { return t.def.Destructive(in) }

// MaxResultSizeChars is the inline result limit (Unbounded: the tool limits itself).
func (t *Tool) MaxResultSizeChars() int { return t.def.MaxResultSizeChars }

// ShouldDefer reports whether the pool lists the tool by name only.
func (t *Tool) ShouldDefer() bool { return t.def.Defer }

// ValidateSchema checks raw input against the schema; the error names the offending field.
func (t *Tool) ValidateSchema(in any) error {
	if err := t.schema.Validate(in); err != nil {
		return schemaError(err)
	}
	return nil
}

// Validate runs the tool's semantic checks.
func (t *Tool) Validate(ctx context.Context, c *Call) error {
	if t.def.Validate == nil {
		return nil
	}
	return t.def.Validate(ctx, c)
}

// Backfill fills derived input.
func (t *Tool) Backfill(c *Call) error {
	if t.def.Backfill == nil {
		return nil
	}
	return t.def.Backfill(c)
}

// CheckPermissions gathers the tool-specific facts for the policy.
func (t *Tool) CheckPermissions(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	if t.def.CheckPermissions == nil {
		return permission.ToolFacts{}, nil
	}
	return t.def.CheckPermissions(ctx, c)
}

// Call runs the tool.
func (t *Tool) Call(ctx context.Context, c *Call, progress Progress) (*Result, error) {
	if progress == nil {
		progress = func(Event) {}
	}
	return t.def.Run(ctx, c, progress)
}
