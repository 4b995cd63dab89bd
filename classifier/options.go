package classifier

import (
	"slices"
	"strings"
)

// optSpec describes a command's getopt-style options well enough to tell
// option arguments from operands. It need not list every option: callers
// decide what an option they do not know means.
type optSpec struct {
	shortArg string   // short options that take an argument (-n 5, -n5)
	shortOpt string   // short options with an optional, attached-only argument (-I, -Iseconds)
	longArg  []string // long options that take an argument (--date X, --date=X)
	// permute is true for GNU tools that accept options after operands.
	permute bool
	// longFlag are long options without an argument whose name starts another's that takes
	// one (tree's --info and --infofile): given whole, they are themselves, not an abbreviation.
	longFlag []string
	// exactLong: the command takes long options only whole, never abbreviated (jq, rg, node),
	// so --slurp is itself there, not the start of --slurpfile.
	exactLong bool
	// countWord: a short-option word whose first letter is a digit is one option that takes
	// no other word, as head's and tail's obsolete count is: -99c is 99 bytes, not -9 -9 and
	// a -c whose value is the next word (the file read). Where digits are ordinary options
	// (grep -5f PATS reads PATS) it must stay unset.
	countWord bool
}

// opt is one parsed option.
type opt struct {
	name   string // "n" for -n, "date" for --date
	long   bool
	val    string
	hasVal bool
}

// parseOpts splits args into options and operands. A long option name is
// kept as written (possibly an abbreviation); see longIs. It stops at "--"
// and, unless sp.permute, at the first operand.
func parseOpts(args []string, sp optSpec) (opts []opt, operands []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			name, val, has := strings.Cut(a[2:], "=")
			o := opt{name: name, long: true, val: val, hasVal: has}
			if !has && !slices.Contains(sp.longFlag, name) && longTakesArg(name, sp.longArg, sp.exactLong) && i+1 < len(args) {
				i++
				o.val, o.hasVal = args[i], true
			}
			opts = append(opts, o)
		case sp.countWord && len(a) > 1 && a[0] == '-' && a[1] >= '0' && a[1] <= '9':
			opts = append(opts, opt{name: a[1:]})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				o := opt{name: string(c)}
				if strings.IndexByte(sp.shortArg, c) >= 0 {
					if j+1 < len(a) {
						o.val, o.hasVal = a[j+1:], true
					} else if i+1 < len(args) {
						i++
						o.val, o.hasVal = args[i], true
					}
					opts = append(opts, o)
					break
				}
				if strings.IndexByte(sp.shortOpt, c) >= 0 {
					if j+1 < len(a) {
						o.val, o.hasVal = a[j+1:], true
					}
					opts = append(opts, o)
					break
				}
				opts = append(opts, o)
			}
		default:
			if !sp.permute {
				return opts, append(operands, args[i:]...)
			}
			operands = append(operands, a)
		}
	}
	return opts, operands
}

// longTakesArg reports whether name (abbreviated, unless exact) names a long option that
// takes an argument.
func longTakesArg(name string, longs []string, exact bool) bool {
	for _, l := range longs {
		if name != "" && (l == name || !exact && strings.HasPrefix(l, name)) {
			return true
		}
	}
	return false
}

// longIs reports whether the long option name as written could select full:
// getopt_long accepts any unambiguous prefix, so --out means --output.
func longIs(name, full string) bool {
	return name != "" && strings.HasPrefix(full, name)
}

// hasFlag reports whether any of args is a short option in short (also
// inside a bundle such as -uo) or a long option that abbreviates one of
// longs. It scans every word, option arguments included, and does not stop
// at "--": an option argument may itself be "--", so stopping could miss a
// later real option. That errs toward "not read-only", never the other way.
func hasFlag(args []string, short string, longs ...string) bool {
	for _, a := range args {
		switch {
		case a == "--" || a == "-":
		case strings.HasPrefix(a, "--"):
			name, _, _ := strings.Cut(a[2:], "=")
			for _, l := range longs {
				if longIs(name, l) {
					return true
				}
			}
		case len(a) > 1 && a[0] == '-' && short != "":
			if strings.ContainsAny(a[1:], short) {
				return true
			}
		}
	}
	return false
}
