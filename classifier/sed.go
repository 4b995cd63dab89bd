package classifier

import "strings"

// ReasonSedInPlace is sed's reason when in-place editing is its one problem: the script only
// edits. acceptEdits, auto's stage one and the approval preview take sed by this reason alone.
const ReasonSedInPlace = "sed_in_place"

// checkSed allows sed only without in-place editing, script files, and
// script commands that write files (w, W, s///w), read files into the output
// stream (r, R) or run programs (e, s///e). Of a bad option and a script file,
// the one whose word comes first is reported, then a script's problem, and
// sed_in_place only when in-place editing is sed's one problem: acceptEdits
// lets an in-place edit of the session's files run by that reason, so a
// script that also runs programs or touches other files must not hide behind it.
func checkSed(args []string, _ *walker) string {
	a := ParseSedArgs(args)
	switch first := min(a.Bad, a.ScriptFileAt); {
	case first == len(args)+1:
	case first == a.ScriptFileAt:
		return "sed_script_file" // also when its file name is missing
	default:
		return "unsafe_flag"
	}
	for _, s := range a.Scripts {
		if r := sedScript(s); r != "" {
			return r
		}
	}
	if a.InPlaceAt <= len(args) {
		return ReasonSedInPlace
	}
	return ""
}

// sedOpensFiles reports a sed command line whose scripts read or write files of their own
// (r, R, w, W, s///w), run programs (e, s///e), come from a file (-f), or cannot be read.
func sedOpensFiles(args []string) bool {
	a := ParseSedArgs(args)
	if a.ScriptFileAt <= len(args) || a.Bad <= len(args) {
		return true
	}
	for _, s := range a.Scripts {
		if r := sedScript(s); r != "" {
			return true
		}
	}
	return false
}

// sedRunsPrograms reports a sed command line that may run a program: a script with e or
// s///e, one it cannot read, or a script file.
func sedRunsPrograms(args []string) bool {
	a := ParseSedArgs(args)
	if a.ScriptFileAt <= len(args) || a.Bad <= len(args) {
		return true
	}
	for _, s := range a.Scripts {
		if r := sedScript(s); r == "sed_exec" || r == "sed_unparsed" {
			return true
		}
	}
	return false
}

// SedArgs is a sed command line's words sorted out as GNU sed reads them.
type SedArgs struct {
	// Kept is every option word but -i/--in-place (with the words of their arguments), in
	// order, then the script operand when no -e or -f gave the script: sed's command line
	// without -i and without the files.
	Kept []string
	// Scripts are the script texts: each -e/--expression, or the first operand.
	Scripts []string
	// Files are the operands after the script.
	Files []string
	// Suffix is -i's backup suffix (-i.bak; -in is the suffix "n", as GNU sed reads it).
	Suffix string
	// FollowSymlinks and Debug say --follow-symlinks and --debug were given.
	FollowSymlinks, Debug bool
	// InPlaceAt, ScriptFileAt and Bad are the index of the first word with -i, with -f or
	// --file, and of the first word sed would refuse (an unknown option, one missing its
	// argument, no script at all), or len(args)+1 when there is none.
	InPlaceAt, ScriptFileAt, Bad int
}

// ParseSedArgs sorts out sed's arguments (the words after "sed").
func ParseSedArgs(args []string) SedArgs {
	none := len(args) + 1
	a := SedArgs{InPlaceAt: none, ScriptFileAt: none, Bad: none}
	at := func(p *int, i int) {
		*p = min(*p, i)
	}
	script := false
	var operands []string
	// value takes an option's argument: the rest of its word, or the next word (false: none).
	value := func(i *int, rest string) (string, bool) {
		if rest != "" {
			return rest, true
		}
		if *i+1 >= len(args) {
			return "", false
		}
		*i++
		a.Kept = append(a.Kept, args[*i])
		return args[*i], true
	}
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(w, "--"):
			name, val, has := strings.Cut(w[2:], "=")
			switch {
			case name == "":
				at(&a.Bad, i)
			case longIs(name, "in-place"):
				at(&a.InPlaceAt, i)
				a.Suffix = val
			case longIs(name, "expression"), longIs(name, "file"), longIs(name, "line-length"):
				a.Kept = append(a.Kept, w)
				if longIs(name, "file") {
					at(&a.ScriptFileAt, i)
					script = true
				}
				if !has {
					var ok bool
					if val, ok = value(&i, ""); !ok {
						at(&a.Bad, i)
						continue
					}
				}
				if longIs(name, "expression") {
					a.Scripts, script = append(a.Scripts, val), true
				}
			case longIs(name, "follow-symlinks"):
				a.Kept, a.FollowSymlinks = append(a.Kept, w), true
			case longIs(name, "debug"):
				a.Kept, a.Debug = append(a.Kept, w), true
			case longIs(name, "quiet"), longIs(name, "silent"), longIs(name, "null-data"),
				longIs(name, "zero-terminated"), longIs(name, "regexp-extended"), longIs(name, "separate"),
				longIs(name, "unbuffered"), longIs(name, "posix"), longIs(name, "sandbox"), longIs(name, "binary"):
				a.Kept = append(a.Kept, w)
			default:
				at(&a.Bad, i)
			}
		case len(w) > 1 && w[0] == '-':
			a.shortOptions(w, &i, &script, value, at)
		default:
			operands = append(operands, w)
		}
	}
	if !script {
		if len(operands) == 0 {
			at(&a.Bad, len(args))
			return a
		}
		a.Scripts = append(a.Scripts, operands[0])
		a.Kept, operands = append(a.Kept, operands[0]), operands[1:]
	}
	a.Files = operands
	return a
}

// shortOptions reads one word of short options, args[*i]. -i takes the rest of the word as
// its suffix; -e, -f and -l take the rest of the word or the next one.
func (a *SedArgs) shortOptions(w string, i *int, script *bool, value func(*int, string) (string, bool), at func(*int, int)) {
	for j := 1; j < len(w); j++ {
		switch w[j] {
		case 'n', 'E', 'r', 's', 'u', 'z', 'b':
		case 'i':
			if j > 1 {
				a.Kept = append(a.Kept, w[:j])
			}
			at(&a.InPlaceAt, *i)
			a.Suffix = w[j+1:]
			return
		case 'e', 'f', 'l':
			a.Kept = append(a.Kept, w)
			if w[j] == 'f' {
				at(&a.ScriptFileAt, *i)
				*script = true
			}
			pos := *i
			v, ok := value(i, w[j+1:])
			switch {
			case !ok:
				at(&a.Bad, pos)
			case w[j] == 'e':
				a.Scripts, *script = append(a.Scripts, v), true
			}
			return
		default:
			at(&a.Bad, *i)
			return
		}
	}
	a.Kept = append(a.Kept, w)
}

// sedScript parses a sed script just far enough to find its commands. It
// follows GNU sed's scanner (a backslash always takes the next character, a
// regex ends at the first unescaped delimiter outside a bracket expression);
// anything it does not recognise is refused, so a misparse can only make it
// stricter.
func sedScript(s string) string {
	i := 0
	n := len(s)
	skipSpace := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	// bracket skips the bracket expression opening at s[i], as a regex matcher reads it: GNU
	// sed does not end a regex at its delimiter inside one, so `s/[/]/#/e` has the flag e. It
	// is false for one not closed, or holding a backslash or a newline, which sed and the
	// regex library may each read their own way.
	bracket := func() bool {
		j := i + 1
		if j < n && s[j] == '^' {
			j++
		}
		if j < n && s[j] == ']' {
			j++ // a leading ] is one of the set
		}
		for j < n {
			switch c := s[j]; {
			case c == '\\' || c == '\n':
				return false
			case c == '[' && j+1 < n && strings.IndexByte(":.=", s[j+1]) >= 0:
				// [:alpha:], [.x.], [=x=]: their ] does not close the set.
				end := strings.Index(s[j+2:], string(s[j+1])+"]")
				if end < 0 {
					return false
				}
				j += 2 + end + 2
			case c == ']':
				i = j + 1
				return true
			default:
				j++
			}
		}
		return false
	}
	// delimited consumes text up to the unescaped delimiter d (skipping bracket expressions
	// in a regex); false if none, or if it cannot tell where that is.
	delimited := func(d byte, regex bool) bool {
		for i < n {
			c := s[i]
			switch {
			case c == '\\':
				i += 2
				continue
			case c == d:
				i++
				return true
			case regex && c == '[':
				if d == '[' || !bracket() {
					return false
				}
				continue
			}
			i++
		}
		return false
	}
	address := func() bool {
		switch {
		case i < n && s[i] >= '0' && s[i] <= '9':
			for i < n && (s[i] >= '0' && s[i] <= '9' || s[i] == '~') {
				i++
			}
		case i < n && s[i] == '$':
			i++
		case i < n && s[i] == '/':
			i++
			if !delimited('/', true) {
				return false
			}
			for i < n && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		case i+1 < n && s[i] == '\\':
			d := s[i+1]
			i += 2
			if !delimited(d, true) {
				return false
			}
			for i < n && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		}
		return true
	}
	toEOL := func() {
		for i < n && s[i] != '\n' {
			i++
		}
	}
	for i < n {
		for i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ';') {
			i++
		}
		if i >= n {
			break
		}
		if s[i] == '#' {
			toEOL()
			continue
		}
		if !address() {
			return "sed_unparsed"
		}
		skipSpace()
		if i < n && s[i] == ',' {
			i++
			skipSpace()
			if i < n && (s[i] == '+' || s[i] == '~') {
				i++
			}
			if !address() {
				return "sed_unparsed"
			}
		}
		skipSpace()
		for i < n && (s[i] == '!' || s[i] == ' ') {
			i++
		}
		if i >= n {
			return "sed_unparsed"
		}
		c := s[i]
		i++
		switch c {
		case '{', '}':
			continue
		case '=', 'd', 'D', 'g', 'G', 'h', 'H', 'l', 'n', 'N', 'p', 'P', 'q', 'Q', 'x', 'z', 'F':
			// l, q and Q take an optional number.
			skipSpace()
			for i < n && s[i] >= '0' && s[i] <= '9' {
				i++
			}
		case ':', 'b', 't', 'T':
			// GNU sed ends a label at a newline, a semicolon or a blank, and
			// reads a command right after it (`:x w FILE` writes FILE), so the
			// label ends here and the loop goes on with the next command.
			skipSpace()
			for i < n && s[i] != '\n' && s[i] != ';' && s[i] != ' ' && s[i] != '\t' {
				i++
			}
			continue
		case 'a', 'i', 'c':
			// Text to the end of the line; a trailing backslash continues it.
			for i < n {
				if s[i] == '\\' {
					i += 2
					continue
				}
				if s[i] == '\n' {
					break
				}
				i++
			}
		case 's', 'y':
			if i >= n || s[i] == '\n' || s[i] == '\\' {
				return "sed_unparsed"
			}
			d := s[i]
			i++
			if !delimited(d, c == 's') || !delimited(d, false) {
				return "sed_unparsed"
			}
			if c == 's' {
				for i < n && strings.IndexByte("gpiImM0123456789", s[i]) >= 0 {
					i++
				}
				if i < n && s[i] == 'w' {
					return "sed_write"
				}
				if i < n && s[i] == 'e' {
					return "sed_exec"
				}
			}
		case 'w', 'W':
			return "sed_write"
		case 'r', 'R':
			return "sed_read_file"
		case 'e':
			return "sed_exec"
		default:
			return "sed_unparsed"
		}
		skipSpace()
		if i < n && s[i] != ';' && s[i] != '\n' && s[i] != '}' && s[i] != '#' {
			return "sed_unparsed"
		}
	}
	return ""
}
