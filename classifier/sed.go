package classifier

import "strings"

// checkSed allows sed only without in-place editing, script files, and
// script commands that write files (w, W, s///w), read files into the output
// stream (r, R) or run programs (e, s///e).
func checkSed(args []string, _ *walker) string {
	var scripts []string
	haveScript := false
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "--"):
			name, val, has := strings.Cut(a[2:], "=")
			switch {
			case name == "":
				return "unsafe_flag"
			case longIs(name, "in-place"):
				return "sed_in_place"
			case longIs(name, "file"):
				return "sed_script_file"
			case longIs(name, "expression"):
				if !has {
					if i+1 >= len(args) {
						return "unsafe_flag"
					}
					i++
					val = args[i]
				}
				scripts = append(scripts, val)
				haveScript = true
			case longIs(name, "line-length"):
				if !has {
					i++
				}
			case longIs(name, "quiet"), longIs(name, "silent"), longIs(name, "null-data"),
				longIs(name, "zero-terminated"), longIs(name, "regexp-extended"), longIs(name, "separate"),
				longIs(name, "unbuffered"), longIs(name, "posix"), longIs(name, "debug"), longIs(name, "sandbox"),
				longIs(name, "binary"), longIs(name, "follow-symlinks"):
			default:
				return "unsafe_flag"
			}
		case len(a) > 1 && a[0] == '-':
		bundle:
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'n', 'E', 'r', 's', 'u', 'z', 'b':
				case 'i':
					return "sed_in_place"
				case 'f':
					return "sed_script_file"
				case 'e', 'l':
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							return "unsafe_flag"
						}
						i++
						v = args[i]
					}
					if a[j] == 'e' {
						scripts = append(scripts, v)
						haveScript = true
					}
					break bundle
				default:
					return "unsafe_flag"
				}
			}
		default:
			operands = append(operands, a)
		}
	}
	if !haveScript {
		if len(operands) == 0 {
			return "unsafe_flag"
		}
		scripts = append(scripts, operands[0])
	}
	for _, s := range scripts {
		if r := sedScript(s); r != "" {
			return r
		}
	}
	return ""
}

// sedScript parses a sed script just far enough to find its commands. It
// follows GNU sed's scanner (a backslash always takes the next character, a
// regex ends at the first unescaped delimiter); anything it does not
// recognise is refused, so a misparse can only make it stricter.
func sedScript(s string) string {
	i := 0
	n := len(s)
	skipSpace := func() {
		for i < n && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
	}
	// delimited consumes text up to the unescaped delimiter d; false if none.
	delimited := func(d byte) bool {
		for i < n {
			c := s[i]
			if c == '\\' {
				i += 2
				continue
			}
			i++
			if c == d {
				return true
			}
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
			if !delimited('/') {
				return false
			}
			for i < n && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		case i+1 < n && s[i] == '\\':
			d := s[i+1]
			i += 2
			if !delimited(d) {
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
			if !delimited(d) || !delimited(d) {
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
