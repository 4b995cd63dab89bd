package permission

import (
	"errors"
	"net"
	"net/netip"
	"path"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/text/unicode/norm"

	"github.com/sandboxd/sandboxd/classifier"
	"github.com/sandboxd/sandboxd/internal/pctenc"
)

// The matchers below are the primitives the Rego policy calls as custom builtins. Compiled
// path patterns are cached by their text: a decision only looks them up, so matching 200
// rules costs map lookups, not splits.

// memo is a memo of compiled patterns, least recently used out first, bounded both in entries
// and in an estimate of the bytes they hold. The patterns are a user's own (a rule is up to
// maxRuleLen bytes, anchored under a directory as long again) and live on after the session
// that held them, so a bound in entries alone let a user cycling sessions of large rules grow
// the root daemon by gigabytes, never given back.
type memo[V any] struct {
	// size estimates the bytes v holds beyond its key's.
	size func(v V) int

	mu    sync.Mutex
	lru   *simplelru.LRU[string, memoEntry[V]]
	bytes int // the sum of the entries' sizes
}

type memoEntry[V any] struct {
	v    V
	size int // the entry's estimate, its key and the LRU's own bookkeeping included
}

const (
	// memoSize bounds a memo's entries.
	memoSize = 20000
	// memoMaxBytes bounds the bytes a memo's entries hold, by their estimates (within a tenth
	// of the heap they take): memoSize ordinary patterns of a few hundred bytes each, or a few
	// hundred of the largest a rule can make.
	memoMaxBytes = 16 << 20
	// memoEntryOverhead is what the LRU keeps for an entry besides the key and the value: its
	// list element and map slot.
	memoEntryOverhead = 128
)

func (c *memo[V]) get(key string, build func(string) V) V {
	c.mu.Lock()
	if c.lru == nil {
		c.lru, _ = simplelru.NewLRU(memoSize, func(_ string, e memoEntry[V]) { c.bytes -= e.size })
	}
	if e, ok := c.lru.Get(key); ok {
		c.mu.Unlock()
		return e.v
	}
	c.mu.Unlock()
	// Built unlocked: other lookups need not wait for it.
	v := build(key)
	n := len(key) + c.size(v) + memoEntryOverhead
	if n > memoMaxBytes/16 {
		return v // would crowd out too much of the memo for one pattern; no rule makes one
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.lru.Peek(key); ok {
		return e.v // built meanwhile by another caller: kept once, and counted once
	}
	c.lru.Add(key, memoEntry[V]{v: v, size: n}) // evicting the oldest past memoSize
	c.bytes += n
	for c.bytes > memoMaxBytes {
		c.lru.RemoveOldest()
	}
	return v
}

// held is how many entries c holds and the bytes they hold by their estimates.
func (c *memo[V]) held() (entries, bytes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru == nil {
		return 0, 0
	}
	return c.lru.Len(), c.bytes
}

// segsSize estimates what a slice of path segments holds beyond the text they are cut from.
func segsSize(segs []string) int { return 24 + 16*cap(segs) }

// MatchBash reports whether the Bash rule pattern (as in Rule.Pattern) matches the words of one
// simple command, with the classifier's COMPAT semantics (classifier.MatchRule). exactOnly is set
// for commands (watch, setsid, find -exec ...) that only an exact rule (no `*`) may match.
func MatchBash(pattern string, words []string, exactOnly bool) bool {
	if words == nil {
		return false
	}
	return MatchBashText(pattern, strings.Join(words, " "), exactOnly)
}

// MatchBashText is MatchBash on the words already joined with single spaces, for callers that
// test one command against many rules. A cheap literal-prefix check skips patterns that cannot
// match before classifier.MatchRule runs.
func MatchBashText(pattern, text string, exactOnly bool) bool {
	star := strings.IndexByte(pattern, '*')
	if exactOnly && star >= 0 {
		return false
	}
	lit := pattern
	if star >= 0 {
		// `ls *` also matches plain `ls`, so the blank before a `*` is not required.
		lit = strings.TrimRight(pattern[:star], " ")
	}
	if !strings.HasPrefix(text, lit) {
		return false
	}
	return classifier.MatchRule(pattern, []string{text})
}

// MatchBashAllow is MatchBashText for an allow rule, with the command's words as well as their
// joined text: where a word holds a blank, the pattern's blanks must also fall between words
// (classifier.MatchRuleAligned), so a program or argument quoted whole is not read as several.
func MatchBashAllow(pattern, text string, words []string, exactOnly bool) bool {
	if !MatchBashText(pattern, text, exactOnly) {
		return false
	}
	for _, w := range words {
		if strings.Contains(w, " ") {
			return classifier.MatchRuleAligned(pattern, words)
		}
	}
	return true
}

// Marks on the words MatchBashGlobs takes: a word the shell expands, as the policy's input
// gives it (classifier.Subcommand.DenyGlobs).
const (
	GlobPatternMark = "\x00" // then a pathname pattern: any names matching it, or itself
	GlobAnyMark     = "\x01" // then the word's text: any words, or none
	GlobOneMark     = "\x02" // then the word's shape (classifier.GlobOne): one word of that shape

	// GlobMarks are the marks, for a word's first byte.
	GlobMarks = GlobPatternMark + GlobAnyMark + GlobOneMark
)

// maxGlobReadings bounds the readings MatchBashGlobs tries for one command and rule; past it
// the rule is taken to match.
const maxGlobReadings = 4096

// globReadingCost is what one reading of MatchBashGlobs takes from a decision's MatchBudget:
// a user's own rules and command must not keep the root daemon matching for seconds.
const globReadingCost = 64

// MatchBashGlobs is MatchBash for words some of which the shell expands, each marked with
// GlobPatternMark, GlobAnyMark or GlobOneMark: it reports whether some expansion of them
// matches the pattern. Such a word may become any run of the pattern's own words that it
// matches (a glob only names it matches, `pus*` push, a file the line itself can make; a $X
// anything; a quoted word only text of its shape), its own text (a glob that matches no
// file), or nothing (an empty $X, nullglob; never a quoted word). Words the pattern
// does not name never make it match, so trying the pattern's words is trying them all.
//
// Each reading is charged to b; one that would overdraw it is not tried, and the rule is taken
// to match, as past maxGlobReadings.
func MatchBashGlobs(pattern string, words []string, exactOnly bool, b *MatchBudget) bool {
	tokens := strings.Fields(pattern) // a rule's pattern: `:*` already made ` *` (Rule.Pattern)
	choices := make([][]string, len(words))
	readings := 1
	for i, w := range words {
		var kind string
		switch {
		case strings.HasPrefix(w, GlobPatternMark):
			kind, w = GlobPatternMark, w[len(GlobPatternMark):]
		case strings.HasPrefix(w, GlobAnyMark):
			kind, w = GlobAnyMark, w[len(GlobAnyMark):]
		case strings.HasPrefix(w, GlobOneMark):
			kind, w = GlobOneMark, w[len(GlobOneMark):]
		default:
			choices[i] = []string{w}
			continue
		}
		// The word's own text stands for what names none of the rule's words; a glob that
		// matches nothing and an empty $X are gone. One quoted word is always there.
		c := []string{w, ""}
		if kind == GlobOneMark {
			c = c[:1]
		}
		for a := range tokens {
			// A lone * of the rule takes any words already: standing in for it adds nothing.
			for b := a; b < len(tokens) && tokens[b] != "*"; b++ {
				if kind == GlobOneMark {
					// One word, so the run as a whole (its blanks in the word).
					if run := strings.Join(tokens[a:b+1], " "); shapeMayBe(w, run) {
						c = append(c, run)
					}
					continue
				}
				if kind == GlobPatternMark && !globMayName(w, tokens[b]) {
					break
				}
				c = append(c, strings.Join(tokens[a:b+1], " "))
			}
		}
		choices[i] = c
		if readings *= len(c); readings > maxGlobReadings {
			return true // too many to try: taken to match, as a command known only at run time is
		}
	}
	pick := make([]int, len(words))
	parts := make([]string, 0, len(words))
	for {
		if b.left < globReadingCost {
			return true
		}
		b.left -= globReadingCost
		parts = parts[:0]
		for i, c := range choices {
			if s := c[pick[i]]; s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 && MatchBashText(pattern, strings.Join(parts, " "), exactOnly) {
			return true
		}
		i := 0
		for ; i < len(pick); i++ {
			if pick[i]++; pick[i] < len(choices[i]) {
				break
			}
			pick[i] = 0
		}
		if i == len(pick) {
			return false
		}
	}
}

// shapeMayBe reports whether a word of shape (classifier.GlobOne) may be the text s: s holds
// the shape's literals in order, from its start to its end, with any text for each gap; or s
// holds a * of the rule's own, which any word may meet.
func shapeMayBe(shape, s string) bool {
	if strings.Contains(s, "*") {
		return true
	}
	lits := strings.Split(shape, classifier.ShapeGap)
	if len(lits) == 1 {
		return shape == s
	}
	first, last := lits[0], lits[len(lits)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, l := range lits[1 : len(lits)-1] {
		i := strings.Index(s, l)
		if i < 0 {
			return false
		}
		s = s[i+len(l):]
	}
	return true
}

// globMayName reports whether the pathname pattern g may expand to the rule word tok: tok
// matches it (bash's [!…] read as [^…]), or tok holds a * of the rule's own, which any name
// may meet. A pattern Go cannot read, or one with a POSIX class, is taken to match.
func globMayName(g, tok string) bool {
	if strings.Contains(tok, "*") || strings.Contains(g, "[:") || strings.Contains(g, "[=") || strings.Contains(g, "[.") {
		return true // [[:alpha:]]ush: a class Go's matcher reads as other characters
	}
	ok, err := path.Match(strings.ReplaceAll(g, "[!", "[^"), tok)
	return ok || err != nil
}

type pathMatcher struct {
	segs      []string // cut from the pattern's text, the memo's key
	multiStar bool     // more than one **: use the memoised matcher
	star      bool     // any **: the match may try every segment of the path for each of the pattern's
}

var pathCache = memo[*pathMatcher]{size: func(m *pathMatcher) int { return 32 + segsSize(m.segs) }}

// ErrMatchBudget is a decision whose path rules would take more work against the call's paths
// than one decision may: the rules and the paths are both a user's own, and a path thousands
// of segments deep against a thousand rules of as many segments each kept the root daemon's
// CPUs busy for seconds per call.
var ErrMatchBudget = errors.New("the session's path rules are too costly to match against this call's paths (rules of many segments with **, against a very deep path); shorten the rules or the path")

// MatchBudget bounds the path matching work of one decision, in (pattern segment, path
// segment) pairs. A session's worth of ordinary rules (a thousand, against a path of dozens of
// segments) takes a fraction of it.
type MatchBudget struct{ left int }

// DefaultMatchBudget is one decision's MatchBudget: about 40 ms of matching at worst.
const DefaultMatchBudget = 1 << 20

// NewMatchBudget is a full budget for one decision.
func NewMatchBudget() *MatchBudget { return &MatchBudget{left: DefaultMatchBudget} }

// MatchPathSegsWithin is MatchPathSegs charged to b, up front and at the most the match can
// cost (every pair of pattern and path segments for a pattern with **), so an over-budget
// match costs nothing: ErrMatchBudget, which the caller must not take for "no match".
func MatchPathSegsWithin(absPattern string, segs []string, b *MatchBudget) (bool, error) {
	if absPattern == "" {
		return false, nil
	}
	m := pathMatcherOf(absPattern)
	cost := min(len(m.segs), len(segs)) + 1
	if m.star {
		cost = (len(m.segs) + 1) * (len(segs) + 1)
	}
	if cost > b.left {
		return false, ErrMatchBudget
	}
	b.left -= cost
	return m.match(segs), nil
}

func pathMatcherOf(absPattern string) *pathMatcher {
	return pathCache.get(absPattern, func(s string) *pathMatcher {
		// A run of ** is one **: the same paths, and fewer positions to decide.
		ps := slices.CompactFunc(splitPath(s), func(a, b string) bool { return a == "**" && b == "**" })
		n := 0
		for _, x := range ps {
			if x == "**" {
				n++
			}
		}
		return &pathMatcher{segs: ps, multiStar: n > 1, star: n > 0}
	})
}

func (m *pathMatcher) match(segs []string) bool {
	if !m.multiStar {
		return matchSimple(m.segs, segs)
	}
	return matchSegs(m.segs, segs)
}

// MatchPath reports whether the absolute gitignore-style pattern (AbsPattern's result) matches
// p or one of its ancestors: as in gitignore, a pattern naming a directory covers everything
// below it, so Read(.ssh) denies ~/.ssh/id_rsa.
func MatchPath(absPattern, p string) bool {
	if absPattern == "" || !strings.HasPrefix(p, "/") {
		return false
	}
	return MatchPathSegs(absPattern, SplitPath(p))
}

// SplitPath cleans an absolute path and splits it into segments, for MatchPathSegs.
func SplitPath(p string) []string { return splitPath(path.Clean(p)) }

// MatchPathSegs is MatchPath on a path already split by SplitPath, for callers that test one
// path against many rules.
func MatchPathSegs(absPattern string, segs []string) bool {
	if absPattern == "" {
		return false
	}
	return pathMatcherOf(absPattern).match(segs)
}

// MayMatchBelowWithin reports, charged to b as MatchPathSegsWithin is, whether the absolute
// pattern may match a path strictly below the directory segs names: a search of that tree
// (Grep) would read what the rule is about. A pattern that matches the directory itself or an
// ancestor is MatchPath's to report.
func MayMatchBelowWithin(absPattern string, segs []string, b *MatchBudget) (bool, error) {
	if absPattern == "" {
		return false, nil
	}
	pat := pathMatcherOf(absPattern).segs
	if err := b.charge(len(pat), len(segs)); err != nil {
		return false, err
	}
	return memoized(len(pat), len(segs), func(m func(i, j int) bool, i, j int) bool {
		if j == len(segs) {
			// The directory is consumed: what is left of the pattern names something below.
			return i < len(pat)
		}
		if i == len(pat) {
			return false
		}
		if pat[i] == "**" {
			return m(i+1, j) || m(i, j+1)
		}
		ok, _ := path.Match(pat[i], segs[j])
		return ok && m(i+1, j+1)
	}), nil
}

// charge takes from b what matching n pattern segments against m others may cost, or says
// the budget is spent.
func (b *MatchBudget) charge(n, m int) error {
	cost := (n + 1) * (m + 1)
	if cost > b.left {
		return ErrMatchBudget
	}
	b.left -= cost
	return nil
}

// memoized runs f(i, j) from (0, 0), each pair worked out once: f calls m for the pairs it
// depends on, i in [0, n] and j in [0, k].
func memoized(n, k int, f func(m func(i, j int) bool, i, j int) bool) bool {
	const unknown, no, yes = 0, 1, 2
	memo := make([]uint8, (n+1)*(k+1))
	var m func(i, j int) bool
	m = func(i, j int) bool {
		idx := i*(k+1) + j
		if memo[idx] != unknown {
			return memo[idx] == yes
		}
		res := f(m, i, j)
		memo[idx] = no
		if res {
			memo[idx] = yes
		}
		return res
	}
	return m(0, 0)
}

// MayCover reports, charged to b as MayMatchBelowWithin is, whether some path may both match
// the glob segments walk (a search's pattern, ** for any depth) and what the absolute pattern
// matches, or, with below, lie under it: a listing by walk could then name what the rule is
// about. Two wildcard segments are taken to match a common name unless their literal starts
// or ends tell them apart (*.go and *.env never do).
func MayCover(absPattern string, below bool, walk []string, b *MatchBudget) (bool, error) {
	if absPattern == "" {
		return false, nil
	}
	pat := pathMatcherOf(absPattern).segs
	if below {
		pat = append(slices.Clip(pat), "**")
	}
	if err := b.charge(len(pat), len(walk)); err != nil {
		return false, err
	}
	return memoized(len(pat), len(walk), func(m func(i, j int) bool, i, j int) bool {
		switch {
		case i == len(pat) && j == len(walk):
			return true
		case i < len(pat) && pat[i] == "**":
			return m(i+1, j) || j < len(walk) && m(i, j+1)
		case j < len(walk) && walk[j] == "**":
			return m(i, j+1) || i < len(pat) && m(i+1, j)
		case i < len(pat) && j < len(walk):
			return segsMayMeet(pat[i], walk[j]) && m(i+1, j+1)
		}
		return false
	}), nil
}

// segsMayMeet reports whether one name may match both glob segments x and y. An extglob
// (@(secret), +(a|b), which node-glob and bash read) may match anything.
func segsMayMeet(x, y string) bool {
	const meta = `*?[\`
	if strings.Contains(x, "(") || strings.Contains(y, "(") {
		return true
	}
	switch {
	case !strings.ContainsAny(x, meta):
		return mayMatchName(y, x)
	case !strings.ContainsAny(y, meta):
		return mayMatchName(x, y)
	}
	xs, ys := x[:strings.IndexAny(x, meta)], y[:strings.IndexAny(y, meta)]
	if !strings.HasPrefix(xs, ys) && !strings.HasPrefix(ys, xs) {
		return false
	}
	xe, ye := x[strings.LastIndexAny(x, meta)+1:], y[strings.LastIndexAny(y, meta)+1:]
	// A literal end after a ] or an escape is not read here: only after * or ?.
	if c := x[strings.LastIndexAny(x, meta)]; c != '*' && c != '?' {
		xe = ""
	}
	if c := y[strings.LastIndexAny(y, meta)]; c != '*' && c != '?' {
		ye = ""
	}
	return strings.HasSuffix(xe, ye) || strings.HasSuffix(ye, xe)
}

// mayMatchName is path.Match of a glob as shells, ripgrep and Python read it, where [!x]
// negates as [^x] does; a pattern path.Match cannot read (secret\ or secret[ cut at a slash
// of \/ or [/]) may match anything.
func mayMatchName(pattern, name string) bool {
	ok, err := path.Match(strings.ReplaceAll(pattern, "[!", "[^"), name)
	return ok || err != nil
}

// matchSimple matches a pattern with at most one ** without allocating: backtracking over a
// single ** is linear in the path length.
func matchSimple(pat, segs []string) bool {
	for i, p := range pat {
		if p == "**" {
			for x := i; x <= len(segs); x++ {
				if matchSimple(pat[i+1:], segs[x:]) {
					return true
				}
			}
			return false
		}
		if i >= len(segs) {
			return false
		}
		if ok, _ := path.Match(p, segs[i]); !ok {
			return false
		}
	}
	return true
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	// A name and its canonical equivalent (café as one letter é, or as e and a combining
	// accent, as macOS writes names) are one name to whoever reads a rule and to Read, which
	// opens either: a rule and a path are matched in one form.
	if !isASCII(p) {
		p = norm.NFC.String(p)
	}
	return strings.Split(p, "/")
}

// isASCII reports whether s holds only ASCII bytes, which every normal form leaves as they are.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// NameForms are p and its canonically equivalent spellings a file system may hold (NFC, NFD):
// each distinct one, p first. A rule naming one must hide or protect each in the kernel, which
// compares names byte by byte.
func NameForms(p string) []string {
	out := []string{p}
	if isASCII(p) {
		return out
	}
	for _, f := range []string{norm.NFC.String(p), norm.NFD.String(p)} {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// matchSegs matches pattern segments against path segments; the pattern may end early
// (ancestor match).
func matchSegs(pat, segs []string) bool { return matchSegments(pat, segs, false) }

// matchSegments matches pattern segments against segs: * and the like within a segment, **
// over any number of them. whole requires every segment of segs to be matched; otherwise a
// match of a leading part (an ancestor) is enough. Each (pattern, path) position is decided
// once and in constant steps (a ** either ends here or takes one more segment), so the cost
// is at most len(pat)*len(segs) segment matches however many ** a rule holds: a user's own
// rule of a thousand **, against a path two thousand segments deep, once took the daemon
// 95 s of CPU.
func matchSegments(pat, segs []string, whole bool) bool {
	const unknown, no, yes = 0, 1, 2
	w := len(segs) + 1
	memo := make([]uint8, (len(pat)+1)*w)
	var m func(i, j int) bool
	m = func(i, j int) bool {
		if i == len(pat) {
			return !whole || j == len(segs)
		}
		k := i*w + j
		if memo[k] != unknown {
			return memo[k] == yes
		}
		res := false
		if pat[i] == "**" {
			res = m(i+1, j) || j < len(segs) && m(i, j+1)
		} else if j < len(segs) {
			ok, _ := path.Match(pat[i], segs[j])
			res = ok && m(i+1, j+1)
		}
		memo[k] = no
		if res {
			memo[k] = yes
		}
		return res
	}
	return m(0, 0)
}

// LiteralPath is p as a path rule's pattern that matches p alone: a file named `*` or `[a-z]*`
// is that file, not every file its name would match as a glob. A `$` is escaped too, so the
// rule suggested for a file named `$HOME` loads: an unescaped one is refused as a variable.
func LiteralPath(p string) string { return strings.ReplaceAll(escapeGlob(p), "$", `\$`) }

// escapeGlob quotes glob metacharacters of a literal base directory (cwd, home) so a directory
// named `[x]` does not turn into a character class.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Anchors are the directories path rules are relative to.
type Anchors struct {
	Home, Cwd string
	// HomeLeadsTo and CwdLeadsTo are where Home and Cwd lead, their links resolved as the
	// session's owner ("" when not known). A session given as ~/link reads ~/real/x by that
	// name too, so a rule anchored at the link must also hold there (AbsPatterns).
	HomeLeadsTo, CwdLeadsTo string
}

// leadsTo is where the directory dir, an anchor or one below it, leads: the same path under
// where the deepest anchor holding it leads, or "" when none that leads elsewhere holds it.
func (a Anchors) leadsTo(dir string) string {
	dir = path.Clean(dir)
	best, to := "", ""
	for _, x := range [...][2]string{{a.Cwd, a.CwdLeadsTo}, {a.Home, a.HomeLeadsTo}} {
		d, t := x[0], x[1]
		if !strings.HasPrefix(d, "/") || !strings.HasPrefix(t, "/") {
			continue
		}
		d, t = path.Clean(d), path.Clean(t)
		if d == t || len(d) <= len(best) {
			continue
		}
		if dir == d || strings.HasPrefix(dir, strings.TrimSuffix(d, "/")+"/") {
			best, to = d, path.Join(t, strings.TrimPrefix(dir, d))
		}
	}
	return to
}

// AbsPattern anchors a path rule's pattern; ok is false when the anchor directory is unknown
// (e.g. no home), which the caller must not treat as "matches nothing" for a deny.
func (r Rule) AbsPattern(a Anchors) (string, bool) {
	switch r.Anchor {
	case AnchorRoot:
		return path.Clean(r.Pattern), true
	case AnchorAnywhere:
		return "/**/" + r.Pattern, true
	}
	return r.under(r.base(a))
}

// AbsPatterns is AbsPattern, then, for a rule anchored at a directory that leads elsewhere (a
// cwd, home or settings root reached through a link), the pattern anchored where it leads:
// the same files by their other name, which a call may use (`cat /home/u/real/secrets/k` in a
// session given as /home/u/link), and the kernel's view resolves to.
func (r Rule) AbsPatterns(a Anchors) ([]string, bool) {
	abs, ok := r.AbsPattern(a)
	if !ok {
		return nil, false
	}
	if r.Anchor == AnchorRoot || r.Anchor == AnchorAnywhere {
		return []string{abs}, true
	}
	if to := a.leadsTo(r.base(a)); to != "" {
		if real, ok := r.under(to); ok && real != abs {
			return []string{abs, real}, true
		}
	}
	return []string{abs}, true
}

// base is the directory a rule anchored at the home, the cwd or its settings file is under.
func (r Rule) base(a Anchors) string {
	switch r.Anchor {
	case AnchorHome:
		return a.Home
	case AnchorCwd:
		return a.Cwd
	case AnchorFile:
		if r.Source == SourceCLI || r.Source == SourceSession {
			return a.Cwd
		}
		return r.Root
	}
	return ""
}

// under is the rule's pattern below the literal directory base.
func (r Rule) under(base string) (string, bool) {
	if base == "" || !strings.HasPrefix(base, "/") {
		return "", false
	}
	base = escapeGlob(path.Clean(base))
	if r.Pattern == "" {
		return base, true
	}
	return strings.TrimSuffix(base, "/") + "/" + r.Pattern, true
}

// MatchDomain reports whether the WebFetch domain pattern matches host. Hosts compare
// case-insensitively with a trailing dot dropped; `*.x.com` covers subdomains at any depth but
// not x.com; any other `*` stays inside one label.
func MatchDomain(pattern, host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "" {
		return false
	}
	// An IP address matches only a rule naming it: `domain:*` and `*.x` are about names, and
	// an address reached by number must be allowed by number.
	if strings.Trim(host, "[]") != host || net.ParseIP(host) != nil {
		h, herr := netip.ParseAddr(strings.Trim(host, "[]"))
		p, perr := netip.ParseAddr(strings.Trim(pattern, "[]"))
		if herr != nil || perr != nil {
			return strings.Trim(pattern, "[]") == strings.Trim(host, "[]")
		}
		// By address, not spelling: ::ffff:10.0.0.1 is 10.0.0.1, 0::1 is ::1.
		return h.Unmap() == p.Unmap()
	}
	if pattern == "*" {
		return true
	}
	// Fast paths, so scanning many domain rules does not split strings per rule.
	if !strings.Contains(pattern, "*") {
		return pattern == host
	}
	if rest, ok := strings.CutPrefix(pattern, "*."); ok && !strings.Contains(rest, "*") {
		return strings.HasSuffix(host, "."+rest)
	}
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		// One or more labels, then rest's labels, each a glob (rest has wildcards of its own,
		// so it cannot be compared as a suffix).
		i := strings.Index(host, ".")
		return i > 0 && matchLabels(rest, host[i+1:], true)
	}
	return matchLabels(pattern, host, false)
}

func matchLabels(pattern, host string, suffix bool) bool {
	pl := strings.Split(pattern, ".")
	hl := strings.Split(host, ".")
	if suffix && len(hl) > len(pl) {
		hl = hl[len(hl)-len(pl):]
	}
	if len(pl) != len(hl) {
		return false
	}
	for i := range pl {
		if ok, _ := path.Match(pl[i], hl[i]); !ok {
			return false
		}
	}
	return true
}

// MatchGlob matches s against a pattern where `*` spans any text (tool names, parameter values).
// It reads the pattern as it goes and takes each literal between two `*` at its first place
// left in s, which for `*` alone finds a match if there is one: one pass over s, and nothing
// compiled or kept. A regexp of the pattern, kept in a memo, held up to 500 KB for a 4 KB rule
// of 2 040 `*` (a user cycling sessions of such rules grew the daemon to 3.4 GB), and took
// seconds to run over a long parameter.
func MatchGlob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if star == len(pattern)-1 {
		// The common shape (mcp__srv__*, Bash*): a prefix test.
		return strings.HasPrefix(s, pattern[:star])
	}
	if !utf8.ValidString(pattern) {
		return false // matches nothing; ParseRule rejects such rules anyway
	}
	if !utf8.ValidString(s) && strings.ContainsRune(pattern, utf8.RuneError) {
		// As a regexp reads text, each byte that is not UTF-8 is a U+FFFD, which the
		// pattern's own U+FFFD matches.
		s = runeErrors(s)
	}
	first, rest := pattern[:star], pattern[star+1:]
	last := rest[strings.LastIndexByte(rest, '*')+1:] // the literal after the last *
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for mid := rest[:len(rest)-len(last)]; mid != ""; {
		// mid holds the literals between two *, each with the * after it.
		var lit string
		lit, mid, _ = strings.Cut(mid, "*")
		i := strings.Index(s, lit)
		if i < 0 {
			return false
		}
		s = s[i+len(lit):]
	}
	return true
}

// runeErrors is s with each byte that is not part of a UTF-8 sequence replaced by U+FFFD.
func runeErrors(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for _, r := range s {
		b.WriteRune(r) // ranging over a string yields U+FFFD for each such byte
	}
	return b.String()
}

// WebRequest is what a WebFetch(METHOD host/path) rule is compared with: one HTTP request
// whose method and path are visible (plain HTTP through the proxy, or WebFetch's own).
type WebRequest struct {
	Method string
	Host   string
	// Path is the decoded path as the request carries it, dot segments and all: MatchWeb
	// removes them itself, from each reading of the path a server may act on.
	Path string
}

var webPathCache = memo[[]string]{size: segsSize}

// MatchWeb reports whether a web rule (host pattern, method, path glob) matches req. Hosts
// match as MatchDomain does. The path glob must match the whole path: `*` is one segment (or
// part of one), `**` any number of segments; a trailing slash is not significant.
//
// Servers disagree on what a path names (webPathReadings): `/x/..;/admin` is /admin to one
// that drops `;parameters` and a segment `..;` under /x to one that does not. fold is for
// deny and ask rules, which must not fail open on a server that is laxer than the rule: the
// method and the path compare case-insensitively, and any reading matching is a match. Allow
// rules (fold false) match exactly and only when every reading matches, so an allow never
// covers more than it says.
func MatchWeb(hostPattern, method, pathPattern string, req WebRequest, fold bool) bool {
	if req.Method == "" || !MatchDomain(hostPattern, req.Host) {
		return false
	}
	if method != "*" && method != req.Method && !(fold && strings.EqualFold(method, req.Method)) {
		return false
	}
	if fold {
		pathPattern = foldCase(pathPattern)
	}
	pat := webPathCache.get(pathPattern, splitPath)
	var buf [6]string
	for _, p := range webPathReadings(req.Path, buf[:0]) {
		if fold {
			p = foldCase(p)
		}
		if matchWhole(pat, splitPath(p)) == fold {
			// A deny's first match, or an allow's first miss, decides.
			return fold
		}
	}
	return !fold
}

// foldCase is s as a server that ignores case compares it: each letter through its upper case
// to its lower. Java's equalsIgnoreCase, Python's re.I and .NET compare so, and the dotless ı
// is then the i of /admin, which Go's ToLower alone leaves as it is (ſ and the Kelvin sign K go
// to s and k either way).
func foldCase(s string) string {
	ascii := true
	for i := 0; i < len(s) && ascii; i++ {
		ascii = s[i] < utf8.RuneSelf
	}
	if ascii {
		return strings.ToLower(s)
	}
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
}

// webPathReadings appends to out the paths an origin server may act on for the decoded
// request path p, each with its dot segments removed after its own transformation, never
// before: cleaning first loses what a laxer server sees (path.Clean takes `/a/..;/../b` to
// /a/b, which a server that drops `;parameters` reads as /a/../../b, that is /b). The readings:
//   - p as it is;
//   - p with each segment's `;parameters` dropped (Tomcat, Jetty and Spring read `/x/..;/admin`
//     as /admin);
//   - the laxest: p decoded once more (a server or framework behind a decoding front reads a
//     double-encoded %252e%252e as ..; a malformed escape stays as it is, so one bad escape
//     does not hide the good ones), `\` taken as `/` (IIS, some routers) and `;parameters`
//     dropped;
//   - where the laxest holds a NUL, a byte outside ASCII, a `:` or a segment that ends in dots
//     or blanks or starts with blanks, that one as a server in C, a Windows file system, a
//     trimming Java router or a Unicode-folding router reads it (lenientReading):
//     `/secret%00/x`, `/secret./x`, `/secret%20/x`, `/%09secret/x`, `/%ef%bd%93ecret` and
//     `/x/%e2%80%a5/secret` are all under /secret.
//
// Each is read two ways when it holds an empty segment: path.Clean merges `//` before it
// removes dot segments, while RFC 3986 (5.2.4) and WHATWG URL parsing, so Node's `new URL()`,
// Envoy's normalisation and nginx with merge_slashes off, remove them without merging, and a
// `..` then drops the empty segment: `/secret//../x` is /x to the one, /secret/x to the others
// (removeDotSegments).
//
// A path with no `;`, `%`, `\` or `//` has the one reading; a reading equal to an earlier one is
// left out.
func webPathReadings(p string, out []string) []string {
	out = append(out, path.Clean("/"+p))
	if !strings.ContainsAny(p, ";%\\") && !strings.Contains(p, "//") && !lenientlyRead(p) {
		return out
	}
	add := func(r string) {
		for _, c := range []string{path.Clean("/" + r), removeDotSegments("/" + r)} {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	add(p)
	if strings.Contains(p, ";") {
		add(dropPathParams(p))
	}
	laxest := dropPathParams(strings.ReplaceAll(pctenc.DecodeLenient(p, false), `\`, "/"))
	add(laxest)
	if lenientlyRead(laxest) {
		add(lenientReading(laxest))
	}
	return out
}

// slashLookalikes are characters some routers take as `/` or as `\\` (which IIS takes as
// `/`) and that NFKC leaves as they are.
var slashLookalikes = strings.NewReplacer("\u2215", "/", "\u2044", "/", "\u29f8", "/", "\u2216", "/", `\`, "/")

// lenientlyRead reports whether p holds what lenientReading changes: a NUL, a byte outside
// ASCII, a `:` or a segment that trimmedSegment changes.
func lenientlyRead(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == 0 || c >= 0x80 || c == ':' {
			return true
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if trimmedSegment(seg) != seg {
			return true
		}
	}
	return false
}

// lenientReading is p as lax servers read it: overlong UTF-8 taken for the character it
// spells (%c0%af is `/`), Unicode folded (NFKC: fullwidth `／` and letters, `‥` for `..`, an
// ideographic space), slash look-alikes and `\` taken as `/`, cut at a NUL (a server in C),
// and each segment as Windows reads a name: its `:stream` dropped, then its trailing spaces
// and dots (a segment of dots alone stays a dot segment).
func lenientReading(p string) string {
	p = norm.NFKC.String(decodeOverlong(p))
	p = slashLookalikes.Replace(p)
	if i := strings.IndexByte(p, 0); i >= 0 {
		p = p[:i]
	}
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		seg, _, _ = strings.Cut(seg, ":")
		segs[i] = trimmedSegment(seg)
	}
	return strings.Join(segs, "/")
}

// trimmedSegment is a path segment as the lax servers read it: blanks (every byte up to the
// space: tabs, CR, other controls) dropped at both ends, as Java's String.trim (Spring's
// trimTokens) and Windows drop them, then, but for a segment of dots alone (`..`, `. .` is
// `..`), trailing dots and blanks, as Windows reads a name.
func trimmedSegment(seg string) string {
	t := strings.TrimFunc(seg, isBlank)
	dotOrBlank := func(r rune) bool { return r == '.' || isBlank(r) }
	if strings.TrimFunc(t, dotOrBlank) == "" {
		if strings.Trim(t, ".") == "" {
			return t
		}
		return strings.Map(func(r rune) rune {
			if isBlank(r) {
				return -1
			}
			return r
		}, t)
	}
	return strings.TrimRightFunc(t, dotOrBlank)
}

// isBlank is what String.trim drops: every character at or below the space.
func isBlank(r rune) bool { return r <= ' ' }

// decodeOverlong replaces each overlong UTF-8 sequence for an ASCII character (two bytes led
// by C0 or C1, three led by E0 80-81) by that character, as old decoders did.
func decodeOverlong(p string) string {
	if !strings.ContainsAny(p, "\xc0\xc1\xe0") {
		return p
	}
	b := []byte(p)
	out := b[:0:0]
	for i := 0; i < len(b); i++ {
		switch {
		case (b[i] == 0xc0 || b[i] == 0xc1) && i+1 < len(b) && b[i+1]&0xc0 == 0x80:
			out = append(out, (b[i]&0x1f)<<6|b[i+1]&0x3f)
			i++
		case b[i] == 0xe0 && i+2 < len(b) && (b[i+1] == 0x80 || b[i+1] == 0x81) && b[i+2]&0xc0 == 0x80:
			out = append(out, (b[i+1]&0x3f)<<6|b[i+2]&0x3f)
			i += 2
		default:
			out = append(out, b[i])
		}
	}
	return string(out)
}

// removeDotSegments removes the dot segments of the absolute path p as RFC 3986 (5.2.4) does,
// without merging `//` first: a `..` drops the segment before it even when that one is empty.
// The empty segments left are then folded, since the matcher does not tell them apart from
// none (path.Clean's reading folds them too), so the result differs from path.Clean's only
// where a `..` met an empty segment.
func removeDotSegments(p string) string {
	if !strings.Contains(p, "//") {
		return path.Clean(p)
	}
	segs := strings.Split(p, "/")[1:]
	out := make([]string, 0, len(segs))
	for _, seg := range segs {
		switch seg {
		case ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, seg)
		}
	}
	out = slices.DeleteFunc(out, func(s string) bool { return s == "" })
	return "/" + strings.Join(out, "/")
}

// dropPathParams removes each segment's `;parameters` (RFC 3986's path parameters, which
// Java servlet containers strip before routing).
func dropPathParams(p string) string {
	if !strings.Contains(p, ";") {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	for i, seg := range strings.Split(p, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		seg, _, _ = strings.Cut(seg, ";")
		b.WriteString(seg)
	}
	return b.String()
}

// unescapedMeta drops the escaped wildcards from a pattern segment, leaving the live ones.
var unescapedMeta = strings.NewReplacer(`\*`, "", `\?`, "", `\[`, "")

// matchWhole matches pattern segments against all of segs (no ancestor match, unlike
// matchSegs).
func matchWhole(pat, segs []string) bool { return matchSegments(pat, segs, true) }

// DecidedOnlyOutside reports whether the kernel leaves an absolute Read path pattern to the
// decision somewhere outside the session's dirs: it holds a wildcard before a last `/**`, and
// its literal start is / or holds one of dirs (Read(.env), Read(~/**/*.key) for a session under
// ~). The sandbox hides a literal path wherever it is, everything under one (Read(//dir/**)),
// and each match of a pattern whose literal start lies in a session dir or apart from them
// all, where it walks.
func DecidedOnlyOutside(absPattern string, dirs []string) bool {
	body := strings.TrimPrefix(strings.TrimSuffix(absPattern, "/**"), "/")
	if !strings.ContainsAny(body, "*?[") {
		return false // literal: hidden wherever it is
	}
	var lit []string
	wild := false
	for seg := range strings.SplitSeq(body, "/") {
		if strings.ContainsAny(seg, "*?[") && strings.ContainsAny(unescapedMeta.Replace(seg), "*?[") {
			wild = true
			break
		}
		lit = append(lit, strings.ReplaceAll(seg, `\`, ""))
	}
	if !wild {
		return false
	}
	start := path.Clean("/" + strings.Join(lit, "/"))
	holds := false
	for _, d := range dirs {
		d = path.Clean(d)
		if !path.IsAbs(d) {
			continue
		}
		if start == d || d == "/" || strings.HasPrefix(start, d+"/") {
			return false // walked in the session's dirs
		}
		holds = holds || start == "/" || strings.HasPrefix(d, start+"/")
	}
	return holds || start == "/"
}
