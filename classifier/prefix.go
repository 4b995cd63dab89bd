package classifier

// allowPrefix is the argv allow rules match: safe env assignments and the
// wrappers of COMPAT's fixed list stripped. It is nil when a word is not
// static, so such a command matches no allow rule.
func allowPrefix(sb *sub, strs *strSlab) []string {
	if len(sb.args) == 0 {
		return staticArgv(sb, strs)
	}
	for _, a := range sb.assigns {
		if !a.static {
			return nil
		}
	}
	for _, a := range sb.args {
		if !a.static {
			return nil
		}
	}
	out := strs.take(len(sb.assigns) + len(sb.args))
	for _, a := range sb.assigns {
		if safeEnvAssign(a.word.val, a.static) {
			continue
		}
		// An unsafe assignment stays in the prefix, so `PATH=x npm test`
		// does not match Bash(npm test).
		out = append(out, a.word.val)
	}
	for _, a := range sb.args {
		out = append(out, a.val)
	}
	if len(out) > len(sb.args) {
		// An unsafe assignment leads; wrappers after it stay too.
		return out
	}
	return stripWrappers(out, false)
}

// denyPrefix is the argv deny and ask rules match: every env assignment and
// wrapper stripped (env, xargs with options and sudo too), and non-static
// words kept as their source text, so a deny rule errs toward matching.
func denyPrefix(sb *sub, strs *strSlab) []string {
	if len(sb.args) == 0 {
		out := strs.take(len(sb.assigns))
		for _, a := range sb.assigns {
			out = append(out, a.word.src)
		}
		return out
	}
	out := strs.take(len(sb.args))
	for _, a := range sb.args {
		if a.static {
			out = append(out, a.val)
		} else {
			out = append(out, a.src)
		}
	}
	return stripWrappers(out, true)
}

// stripWrappers removes leading wrappers. Strict mode strips COMPAT's fixed
// list (timeout, time, nice, nohup, stdbuf, command, builtin, noglob,
// flagless xargs); lenient mode also env, exec, xargs with options and sudo,
// and wrappers named by a path.
func stripWrappers(argv []string, lenient bool) []string {
	for depth := 0; len(argv) > 0 && depth < maxWrapDepth; depth++ {
		name := argv[0]
		if lenient {
			// /usr/bin/timeout is timeout to a deny rule, wherever it lives.
			name = baseName(name)
			if len(argv[0]) > 1 && argv[0][0] == '=' {
				// zsh's =cmd is the path of cmd (EQUALS, on by default): cmd to a rule.
				argv[0] = argv[0][1:]
				continue
			}
			switch name {
			case "-", "nocorrect":
				// zsh's precommand modifiers: the command after them runs.
				argv = argv[1:]
				continue
			case "repeat":
				// zsh's repeat N CMD runs CMD N times.
				if len(argv) > 2 {
					argv = argv[2:]
					continue
				}
			}
		}
		if name == "--" && len(argv) > 1 {
			// time -- CMD: the parser leaves time's -- as the command word.
			argv = argv[1:]
			continue
		}
		switch name {
		case "timeout", "time", "nice", "nohup", "stdbuf", "command", "builtin", "noglob":
		case "exec":
			if !lenient {
				return argv
			}
		case "xargs":
			if !lenient && len(argv) > 1 && len(argv[1]) > 0 && argv[1][0] == '-' {
				return argv
			}
		case "env", "sudo":
			if !lenient {
				return argv
			}
		default:
			return argv
		}
		i, reason := unwrapOne(argv, true)
		if reason != "" || i <= 0 || i >= len(argv) {
			return argv
		}
		argv = argv[i:]
	}
	return argv
}

// exactOnly reports commands that COMPAT lets only an exact rule allow:
// they run another command that a prefix rule would wave through.
func exactOnly(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	switch argv[0] {
	case "watch", "setsid", "ionice", "flock":
		return true
	case "find":
		for _, a := range argv[1:] {
			switch a {
			case "-exec", "-execdir", "-ok", "-okdir", "-delete":
				return true
			}
		}
	}
	return false
}
