package classifier

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// classifyAllocBytes classifies line and returns the bytes allocated meanwhile. Not parallel:
// the count is the process's.
func classifyAllocBytes(line string) (*Classification, uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := Classify(line, testOpts)
	runtime.ReadMemStats(&after)
	return c, after.TotalAlloc - before.TotalAlloc
}

// classifyBounded classifies a line past a bound: it parses, and costs at most
// maxBoundedAlloc.
func classifyBounded(t *testing.T, line string) *Classification {
	t.Helper()
	c, alloc := classifyAllocBytes(line)
	if c.ParseError != nil {
		t.Fatalf("parse error: %s", *c.ParseError)
	}
	if alloc > maxBoundedAlloc {
		t.Errorf("allocated %d MB, want at most %d", alloc>>20, maxBoundedAlloc>>20)
	}
	return c
}

// maxBoundedAlloc is what a line past the brace or value bounds may allocate: far above what
// they cost bounded, far below the hundreds of megabytes, up to gigabytes, they cost before.
const maxBoundedAlloc = 64 << 20

// TestBraceBounds: brace groups side by side cost n² per word in mvdan.cc/sh, and each word
// they give is walked by several checks; past the bounds a word's expansion is not told,
// which leaves the paths incomplete and judges an rm target critical.
func TestBraceBounds(t *testing.T) {
	var distinct strings.Builder
	for i := 0; distinct.Len() < 100_000; i++ {
		fmt.Fprintf(&distinct, " %s%d", strings.Repeat("{a,b}", 8), i)
	}
	tests := []struct {
		name string
		line string
		rm   bool
	}{
		{"groups side by side", "ls " + strings.Repeat("{a,b}", 1600), false},
		{"groups in a word", "ls x" + strings.Repeat("{a,b}x", 1600), false},
		{"sequences", "ls " + strings.Repeat("{1..2}", 1600), false},
		{"nested", "ls " + strings.Repeat("{a,", 200) + "b" + strings.Repeat("}", 200), false},
		{"rm", "rm -rf " + strings.Repeat("{a,b}", 1600), true},
		{"many words of 256 each", "ls" + distinct.String(), false},
		{"one word many times", "rm -rf" + strings.Repeat(" "+strings.Repeat("{a,b}", 8), 2500), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := classifyBounded(t, tc.line)
			if !c.PathsIncomplete || !c.PathsUnbounded {
				t.Errorf("paths incomplete %v, unbounded %v; want both: the expansion is not told", c.PathsIncomplete, c.PathsUnbounded)
			}
			if tc.rm && !slices.Contains(c.Risks, RiskCriticalPathRm) {
				t.Errorf("risks %v, want %s: an rm target not told may be anything", c.Risks, RiskCriticalPathRm)
			}
			e := c.Subcommands[0].DenyExpanded
			if e == nil || !slices.Contains(e.Globs, GlobAny) {
				t.Errorf("deny words expanded, none taken for any words; want the brace word so taken")
			}
		})
	}
}

// TestBraceBoundsWithin: a word within the bounds is still expanded, and the line's memo
// gives each check the same words.
func TestBraceBoundsWithin(t *testing.T) {
	c := Classify("rm -rf "+strings.Repeat("{a,b}", 3)+" .{pytest,mypy}_cache", testOpts)
	e := c.Subcommands[0].DenyExpanded
	if e == nil || len(e.Words) != 2+8+2 || slices.Contains(e.Globs, GlobAny) {
		t.Fatalf("deny words %+v, want rm -rf, 8 words and 2", e)
	}
	if slices.Contains(c.Risks, RiskCriticalPathRm) {
		t.Errorf("risks %v: relative names in the cwd are not critical", c.Risks)
	}
	var paths []string
	for _, p := range c.Paths {
		paths = append(paths, p.Path)
	}
	for _, want := range []string{"/home/u/proj/aaa", "/home/u/proj/bbb", "/home/u/proj/.mypy_cache"} {
		if !slices.Contains(paths, want) {
			t.Errorf("paths %v, want %s among them", paths, want)
		}
	}
}

// TestBraceProduct: braceProduct gives the words expand.BracesSeq gives, in its order.
func TestBraceProduct(t *testing.T) {
	for _, src := range []string{
		"{a,b}{1,2}", "x{a,b}y{c,d}z", "{a{1,2},b}c{x,y}", "{1..3}{a..b}", "{01..3..2}x",
		"{,a}{b,}", "'{q,r}'{a,b}", "{a,b}$x{c,d}", "{a,{b,{c,d}}}", "pre{a,b", "{a..c..-1}",
	} {
		w, ok := parseWord(src)
		if !ok {
			t.Fatalf("%s: does not parse", src)
		}
		if !syntax.SplitBraces(w) {
			continue
		}
		var want []string
		for e, err := range expand.BracesSeq(nil, w) {
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			want = append(want, evalWord("x "+src, e).src+"|"+evalWord("x "+src, e).val)
		}
		words, ok := braceProduct(w, maxBraceWords)
		if !ok {
			t.Fatalf("%s: not told", src)
		}
		var got []string
		for _, e := range words {
			got = append(got, evalWord("x "+src, e).src+"|"+evalWord("x "+src, e).val)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", src, got, want)
		}
	}
	w, _ := parseWord(strings.Repeat("{a,b}", 9))
	syntax.SplitBraces(w)
	if _, ok := braceProduct(w, maxBraceWords); ok {
		t.Errorf("512 words told, want not past %d", maxBraceWords)
	}
}

// TestShellVarBounds: a value the line doubles ($x$x$x$x, ten times over) grows past any
// memory; past maxVarLen it is not told, and the line that runs it or removes it is judged
// as one that may remove anything.
func TestShellVarBounds(t *testing.T) {
	grow := func(n int, step, run string) string {
		return "x=a; " + strings.Repeat(step+"; ", n) + run
	}
	var chain strings.Builder
	chain.WriteString("v0=x; ")
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&chain, "v%d=$v%d$v%d; ", i, i-1, i-1)
	}
	tests := []struct{ name, line string }{
		{"run", grow(14, "x=$x$x$x$x", "$x")},
		{"run, 64 KB", grow(8, "x=$x$x$x$x", "$x")},
		{"chain to rm", chain.String() + "rm -rf $v30"},
		{"export", "export " + grow(14, "x=$x$x$x$x", "$x")},
		{"declare each", grow(14, "export x=$x$x$x$x", "$x")},
		{"quoted", grow(14, `x="$x$x$x$x"`, `eval "$x"`)},
		{"braced names", grow(14, "x=${x}${x}${x}${x}", "rm -rf ../$x")},
		{"eval", grow(14, "x=$x$x$x$x", "eval $x")},
		{"many refs in one word", grow(3, "x=$x$x$x$x", "rm -rf ./"+strings.Repeat("$x", 2000))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := classifyBounded(t, tc.line)
			if c.ReadOnly || !slices.Contains(c.Risks, RiskCriticalPathRm) {
				t.Errorf("read-only %v, risks %v; want %s: a value not told may be anything", c.ReadOnly, c.Risks, RiskCriticalPathRm)
			}
		})
	}
}

// TestShellVarBoundsEdge: a value up to maxVarLen, and values up to maxVarsLen in all, are
// held and read as before; one byte more and the line is judged as one that may remove
// anything.
func TestShellVarBoundsEdge(t *testing.T) {
	vals := func(n, size int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "x%d=%s; ", i, strings.Repeat("a", size))
		}
		return b.String()
	}
	for _, tc := range []struct {
		name string
		line string
		over bool
	}{
		{"one value at the bound", vals(1, maxVarLen) + "eval $x0", false},
		{"one value past it", vals(1, maxVarLen+1) + "eval $x0", true},
		{"values at the bound", vals(maxVarsLen/maxVarLen, maxVarLen) + "eval $x0", false},
		{"values past it", vals(maxVarsLen/maxVarLen+1, maxVarLen) + "eval $x0", true},
		{"doubled within", "x=ab; y=$x$x; eval $y", false},
		{"read past the bound in one word", vals(1, maxVarLen) + "rm -rf ./" + strings.Repeat("$x0", maxVarsLen/maxVarLen+1), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Classify(tc.line, testOpts)
			if got := slices.Contains(c.Risks, RiskCriticalPathRm); got != tc.over {
				t.Errorf("risks %v; want %s %v", c.Risks, RiskCriticalPathRm, tc.over)
			}
		})
	}
}
