package executor

import (
	"context"
	"fmt"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/worker"
)

const editSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["file_path", "old_string", "new_string"],
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to modify"},
    "old_string": {"type": "string", "description": "The text to replace"},
    "new_string": {"type": "string", "description": "The text to replace it with (must be different from old_string)"},
    "replace_all": {"type": "boolean", "default": false, "description": "Replace all occurrences of old_string (default false)"}
  }
}`

const multiEditSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["file_path", "edits"],
  "properties": {
    "file_path": {"type": "string", "description": "The absolute path to the file to modify"},
    "edits": {
      "type": "array", "minItems": 1,
      "description": "Edits applied in order, all or nothing",
      "items": {
        "type": "object",
        "additionalProperties": false,
        "required": ["old_string", "new_string"],
        "properties": {
          "old_string": {"type": "string"},
          "new_string": {"type": "string"},
          "replace_all": {"type": "boolean", "default": false}
        }
      }
    }
  }
}`

// editMaxResultChars is Edit's inline limit (DESIGN: Edit and Grep 100 000).
const editMaxResultChars = 100_000

func editDef(h *Host) Def {
	return Def{
		Name: "Edit",
		Description: "Performs exact string replacement in a file. The session must have Read the file and it must not have changed since. " +
			"old_string must match exactly one place (include surrounding lines to make it unique) unless replace_all is true; " +
			"new_string must differ. Curly and straight quotes and trailing whitespace are matched loosely, keeping the file's own style.",
		Schema:             editSchema,
		Validate:           requireAbs("file_path"),
		Backfill:           backfillPath("file_path", false),
		CheckPermissions:   pathFacts(h, "file_path", permission.Write),
		MaxResultSizeChars: editMaxResultChars,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			e := worker.Edit{OldString: c.Input.String("old_string"), NewString: c.Input.String("new_string"), ReplaceAll: c.Input.Bool("replace_all")}
			return h.runEdit(ctx, c, []worker.Edit{e})
		},
	}
}

// multiEditDef is the legacy MultiEdit (older SDK typings): deferred, so it is offered by
// name only, but callable.
func multiEditDef(h *Host) Def {
	return Def{
		Name:               "MultiEdit",
		Description:        "Applies several exact string replacements to one file in order, all or nothing (legacy; prefer Edit).",
		Schema:             multiEditSchema,
		Validate:           requireAbs("file_path"),
		Backfill:           backfillPath("file_path", false),
		CheckPermissions:   pathFacts(h, "file_path", permission.Write),
		MaxResultSizeChars: editMaxResultChars,
		Defer:              true,
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			raw, _ := c.Input["edits"].([]any)
			edits := make([]worker.Edit, 0, len(raw))
			for _, r := range raw {
				m, _ := r.(map[string]any)
				in := Input(m)
				edits = append(edits, worker.Edit{OldString: in.String("old_string"), NewString: in.String("new_string"), ReplaceAll: in.Bool("replace_all")})
			}
			return h.runEdit(ctx, c, edits)
		},
	}
}

func (h *Host) runEdit(ctx context.Context, c *Call, edits []worker.Edit) (*Result, error) {
	path := expandPath(c, c.Input.String("file_path"))
	for i, e := range edits {
		if e.OldString == e.NewString {
			which := ""
			if len(edits) > 1 {
				which = fmt.Sprintf("edit %d: ", i+1)
			}
			return nil, errcode.Msg(errcode.Validation, which+"old_string and new_string are the same, so there is nothing to change; pass the new text in new_string")
		}
	}
	if err := h.privateTmpWrite(c); err != nil {
		return nil, err
	}
	expect, rec, _ := expectOf(c.Session, path)
	w, err := h.writer(ctx, c.Session, path, c.decidedWrite)
	if err != nil {
		return nil, err
	}
	r, err := w.Edit(ctx, worker.EditArgs{Path: path, Edits: edits, Expect: expect, Decided: c.decidedWrite})
	if err != nil {
		if errcode.Of(err) == errcode.Stale {
			c.Session.Reads.Forget(path)
		}
		return nil, err
	}
	recordWrite(c.Session, path, r, rec.Partial)
	text := fmt.Sprintf("The file %s has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n%s", path, r.Snippet)
	if r.Created {
		text = fmt.Sprintf("File created successfully at: %s", path)
	}
	res := Text(text)
	if r.Fuzzy {
		res.ExtraMessages = append(res.ExtraMessages, "old_string matched only after normalizing quotes and trailing whitespace; the file's own quote style was kept")
	}
	res.Data = map[string]any{"filePath": path, "replacements": r.Replacements, "fuzzy": r.Fuzzy, "lines": r.Lines}
	return res, nil
}
