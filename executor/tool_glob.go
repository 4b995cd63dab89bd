package executor

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/internal/errcode"
	"github.com/sandboxd/sandboxd/permission"
	"github.com/sandboxd/sandboxd/worker"
)

const globSchema = `{
  "type": "object",
  "additionalProperties": false,
  "required": ["pattern"],
  "properties": {
    "pattern": {"type": "string", "description": "The glob pattern to match files against"},
    "path": {"type": "string", "description": "The directory to search in. If not specified, the current working directory will be used. Omit it for the default; do not pass \"undefined\" or \"null\"."}
  }
}`

// globLimit is how many paths Glob returns (COMPAT: max 100).
const globLimit = 100

func globDef(h *Host) Def {
	return Def{
		Name: "Glob",
		Description: "Fast file pattern matching for any codebase size. Supports patterns like \"**/*.js\" or \"src/**/*.{ts,tsx}\". " +
			"Returns matching file paths sorted by modification time, newest first, at most 100. VCS directories (.git and the like) are skipped.",
		Schema:           globSchema,
		ReadOnly:         always,
		ConcurrencySafe:  always,
		Validate:         cwdRelative("path"),
		Backfill:         backfillPath("path", true),
		CheckPermissions: globFacts(h),
		Run: func(ctx context.Context, c *Call, _ Progress) (*Result, error) {
			start := time.Now()
			root := globRoot(c)
			deny, err := readHeldPatterns(c, "Glob")
			if err != nil {
				return nil, err
			}
			var r *worker.GlobReply
			err = h.withWorker(ctx, c.Session, func(w *worker.Client) error {
				var err error
				r, err = w.Glob(ctx, worker.GlobArgs{Pattern: c.Input.String("pattern"), Root: root, Limit: globLimit, Deny: deny})
				return err
			})
			if err != nil {
				return nil, err
			}
			text := "No files found"
			if len(r.Paths) > 0 {
				text = strings.Join(r.Paths, "\n")
			}
			if r.Truncated {
				text += fmt.Sprintf("\n(Results are truncated: showing the %d newest of %d matches. Use a more specific path or pattern.)", len(r.Paths), r.Total)
			}
			res := Text(text)
			res.Data = map[string]any{"filenames": r.Paths, "numFiles": len(r.Paths), "truncated": r.Truncated, "durationMs": time.Since(start).Milliseconds()}
			return res, nil
		},
	}
}

func globRoot(c *Call) string {
	root := c.Input.String("path")
	if root == "" {
		root = c.Session.Cwd()
	}
	return expandPath(c, root)
}

// globMaxFacts bounds the directories one Glob pattern is checked as; a pattern whose brace
// alternatives name more is refused.
const globMaxFacts = 32

// globFacts are the facts of path and, beside them, of the literal directory prefix of each
// brace alternative of the pattern, made absolute the way the worker walks it: an absolute
// pattern (or one climbing out with `..`) is checked as a read of where it walks, so
// `/home/u/secret/**` is a read of /home/u/secret. Names under a denied path that a wider
// walk meets are dropped by the worker (readDenyPatterns).
func globFacts(h *Host) func(ctx context.Context, c *Call) (permission.ToolFacts, error) {
	byPath := pathFacts(h, "path", permission.Read)
	return func(ctx context.Context, c *Call) (permission.ToolFacts, error) {
		facts, err := byPath(ctx, c)
		if err != nil {
			return facts, err
		}
		root := globRoot(c)
		seen := map[string]bool{root: true}
		for _, f := range facts.Paths {
			seen[f.Requested] = true
		}
		dirs, err := globDirs(root, c.Input.String("pattern"))
		if err != nil {
			return permission.ToolFacts{}, err
		}
		for _, dir := range dirs {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			resolved, special, err := h.resolveFor(ctx, c, dir)
			if err != nil {
				return permission.ToolFacts{}, fmt.Errorf("resolve %s as the session owner: %w", dir, err)
			}
			facts.Paths = append(facts.Paths, permission.PathFact{Requested: dir, Resolved: resolved, Access: permission.Read, Special: special})
		}
		if c.unconfined {
			// The agent's own Glob walks outside any sandbox, and lists what the sandbox
			// hides wherever its walk meets it (h*/* below a hidden dir): a walk that may,
			// from where it starts, is refused, as the agent's own Grep of such a tree is.
			walks := agentGlobWalks(root, c.Input.String("pattern"))
			for _, wk := range walks {
				start := wk.start
				i := slices.IndexFunc(facts.Paths, func(f permission.PathFact) bool { return f.Requested == start })
				resolved := ""
				if i >= 0 {
					resolved = facts.Paths[i].Resolved
				} else if resolved, _, err = h.resolveFor(ctx, c, start); err != nil {
					return permission.ToolFacts{}, fmt.Errorf("resolve %s as the session owner: %w", start, err)
				}
				if err := h.checkTreeUnconfined(c, resolved, "Glob", false, false); err != nil {
					return permission.ToolFacts{}, err
				}
			}
			if err := h.checkGlobNames(ctx, c, walks); err != nil {
				return permission.ToolFacts{}, err
			}
		}
		return facts, nil
	}
}

// checkGlobNames refuses the agent's own Glob where its pattern may list a name a Read deny
// rule covers ([s]ecret/*, **/key.txt under Read(./secret/**)): the agent's walk meets no
// sandbox and no filter, and the policy sees only where it starts.
func (h *Host) checkGlobNames(ctx context.Context, c *Call, walks []globWalk) error {
	pats, err := readDenyPatterns(c, "Glob")
	if err != nil || len(pats) == 0 {
		return err
	}
	b := permission.NewMatchBudget()
	for _, wk := range walks {
		start, _, err := h.resolveFor(ctx, c, wk.start)
		if err != nil {
			return fmt.Errorf("resolve %s as the session owner: %w", wk.start, err)
		}
		walk := append(permission.SplitPath(start), wk.rest...)
		for _, pat := range pats {
			// A rule covers what lies below a dir it names (Read(./secret)); a pattern with
			// wildcards is taken to name files (Read(**/*.key)), one ending in ** says so.
			// What names nothing that exists yet lists nothing (an admin's Read(./secrets/**)
			// in a project with no secrets dir).
			below := false
			if i := strings.IndexAny(pat, "*?[\\"); i < 0 {
				r, err := h.resolveOnHost(c, pat)
				if err == nil && !r.Exists {
					continue
				}
				below = err != nil || r.IsDir
			} else if r, err := h.resolveOnHost(c, pat[:strings.LastIndexByte(pat[:i], '/')+1]); err == nil && !r.Exists {
				continue
			}
			hit, err := permission.MayCover(pat, below, walk, b)
			if err != nil {
				return errcode.Msg(errcode.Validation, "the Glob pattern and the Read deny rules are too many to check against each other")
			}
			if hit {
				return errcode.Msg(errcode.Validation, fmt.Sprintf("the Glob pattern %q may list names under %s that the Read deny pattern %s covers; outside any sandbox it would list them: narrow the pattern, or use sandboxd's own Glob (its MCP server, sbctl mcp), which runs it confined", c.Input.String("pattern"), wk.start, pat))
			}
		}
	}
	return nil
}

// globWalk is where one alternative of a Glob's pattern starts (a dir) and the segments it
// matches below.
type globWalk struct {
	start string
	rest  []string
}

// agentGlobWalks are the walks of the agent's own Glob, which may hand its pattern to ripgrep
// as a -g glob: there a pattern with no slash matches names at any depth (h.txt finds
// hidden/h.txt) and a !pattern every name it does not match, so such an alternative walks the
// whole tree under root, as does each of a pattern with too many alternatives to read.
func agentGlobWalks(root, pattern string) []globWalk {
	whole := []globWalk{{root, []string{"**"}}}
	if pattern == "" {
		return nil
	}
	alts, ok := worker.ExpandBraces(pattern, globMaxFacts)
	if !ok {
		return whole
	}
	var out []globWalk
	for _, alt := range alts {
		if strings.HasPrefix(alt, "!") {
			return whole
		}
		if !strings.Contains(strings.TrimSuffix(alt, "/"), "/") {
			out = append(out, globWalk{root, []string{"**", strings.TrimSuffix(alt, "/")}})
			continue
		}
		base, p := root, alt
		if strings.HasPrefix(alt, "/") {
			base, p = "/", strings.TrimLeft(alt, "/")
		}
		segs := strings.Split(path.Clean(p), "/")
		i := 0
		for i < len(segs) && !strings.ContainsAny(segs[i], "*?[{(\\") {
			i++
		}
		out = append(out, globWalk{filepath.Join(append([]string{base}, segs[:i]...)...), segs[i:]})
	}
	return out
}

// globDirs lists where the worker's walk for pattern under root starts, per brace
// alternative: each alternative's literal directories (all its segments before the first
// with a wildcard, but its last) are walked by name, through any link there, so each is a
// read to check. The pattern is expanded as the worker expands it: checked
// as the text before its first brace instead, `{up}/etc/{a,…,*}` (past 32 alternatives) was a
// read of root while the worker walked root/up/etc, up a link to /. More than globMaxFacts
// distinct directories, or braces the worker would not expand, are refused.
func globDirs(root, pattern string) ([]string, error) {
	if pattern == "" {
		return nil, nil
	}
	alts, ok := worker.ExpandBraces(pattern, worker.MaxBracePatterns)
	if !ok {
		return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("the pattern's braces expand to more than %d patterns; use fewer {a,b} groups", worker.MaxBracePatterns))
	}
	var out []string
	seen := map[string]bool{}
	for _, alt := range alts {
		base, p := root, alt
		if strings.HasPrefix(alt, "/") {
			base, p = "/", strings.TrimLeft(alt, "/")
		}
		// The last segment is matched against the names of the dir before it, never entered.
		segs := strings.Split(path.Clean(p), "/")
		static := segs[:len(segs)-1]
		for i, seg := range static {
			if strings.ContainsAny(seg, "*?[{\\") {
				static = static[:i]
				break
			}
		}
		dir := filepath.Join(append([]string{base}, static...)...)
		if seen[dir] {
			continue
		}
		if seen[dir] = true; len(seen) > globMaxFacts {
			return nil, errcode.Msg(errcode.Validation, fmt.Sprintf("the pattern's brace alternatives start in more than %d directories; split it into several Globs", globMaxFacts))
		}
		out = append(out, dir)
	}
	return out, nil
}
