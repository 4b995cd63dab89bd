package classifier

import (
	"reflect"
	"testing"
)

// TestDenyShapes: a word of literals and double-quoted expansions is one word of a shape;
// anything that may become several words, an option of the rule's, or a glob is not.
func TestDenyShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd    string
		globs  []GlobKind
		shapes []string
	}{
		{`rm ./"$f"`, []GlobKind{"", GlobOne}, []string{"", "./" + ShapeGap}},
		{`rm "$dir"/x.o`, []GlobKind{"", GlobOne}, []string{"", ShapeGap + "/x.o"}},
		{`rm -- "${f}"`, []GlobKind{"", "", GlobOne}, []string{"", "", ShapeGap}},
		{`git "pu$(echo s)h" 'o'`, []GlobKind{"", GlobOne, ""}, []string{"", "pu" + ShapeGap + "h", ""}},
		{`rm "$((1+1))".log`, []GlobKind{"", GlobOne}, []string{"", ShapeGap + ".log"}},
		// Several words, or one the shell splits or globs: any words.
		{`rm $f`, []GlobKind{"", GlobAny}, nil},
		{`rm ./$f`, []GlobKind{"", GlobAny}, nil},
		{`rm "$@"`, []GlobKind{"", GlobAny}, nil},
		{`rm "$*"x`, []GlobKind{"", GlobAny}, nil},
		{`rm "${a[@]}"`, []GlobKind{"", GlobAny}, nil},
		{`rm "${a[0]}"`, []GlobKind{"", GlobAny}, nil},
		{`rm "${!p@}"`, []GlobKind{"", GlobAny}, nil},
		{`rm "${x:-$@}"`, []GlobKind{"", GlobAny}, nil},
		{`rm "${x/a/b}"`, []GlobKind{"", GlobAny}, nil},
		{`rm "$f"*`, []GlobKind{"", GlobAny}, nil},
		{`rm ~/"$f"`, []GlobKind{"", GlobAny}, nil},
		{`rm {a,b}"$f"`, []GlobKind{"", GlobAny}, nil},
		{`rm \-"$f"`, []GlobKind{"", GlobAny}, nil},
		{`rm "a\"$f"`, []GlobKind{"", GlobAny}, nil},
		{`rm $'\x2d'"$f"`, []GlobKind{"", GlobAny}, nil},
		{"rm \"$f\"$'\x03'", []GlobKind{"", GlobAny}, nil},
	} {
		var s Subcommand
		for _, sc := range Classify(tc.cmd, Options{}).Subcommands {
			if sc.Text == tc.cmd {
				s = sc
			}
		}
		if !reflect.DeepEqual(s.DenyGlobs, tc.globs) || !reflect.DeepEqual(s.DenyShapes, tc.shapes) {
			t.Errorf("%s: globs %q shapes %q, want %q %q", tc.cmd, s.DenyGlobs, s.DenyShapes, tc.globs, tc.shapes)
		}
	}
}

// TestDenyShapesZsh: zsh's flags and modifiers make one quoted parameter many words, or a
// glob: any words.
func TestDenyShapesZsh(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{`git "${(@)a}"`, `git "${=a}"`, `git "${^a}"`, `git "${~a}"`, `git "$a[@]"`,
		`git "${a:h}"`, `git "${${a}}"`, `git "${(s: :)a}"`} {
		c := Classify(cmd, Options{Shell: ShellZsh})
		if c.ParseError != nil {
			continue // not read at all: every deny rule meets its text
		}
		var s Subcommand
		for _, sc := range c.Subcommands {
			if sc.Text == cmd {
				s = sc
			}
		}
		if len(s.DenyGlobs) != 2 || s.DenyGlobs[1] != GlobAny {
			t.Errorf("%s: globs %q, want any", cmd, s.DenyGlobs)
		}
	}
}
