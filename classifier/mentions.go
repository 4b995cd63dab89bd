package classifier

import (
	"slices"
	"strings"
)

// Mentions: in a command run outside any sandbox (Options.Unconfined), the words of a command
// no path table describes. sandboxd's sandbox holds a Read or Edit deny rule whatever a program
// opens; the agent's own shell holds nothing, so there `awk 1 ~/.ssh/id_rsa`, `tar cf - ~/.ssh`
// and `python3 -c 'open("/home/u/.ssh/id_rsa")'` read what the rule denies unless the decision
// sees the path. Each such word is taken as a path the command may read and write, and so is
// each absolute or ~/ path inside a word (a script's text, --opt=PATH, @PATH); a word known only
// at run time makes the paths incomplete, as `cat $HOME/x` does. A program that builds a name
// from parts is beyond any decision: that is what `sbctl hook --confine` is for.

// maxMentions bounds the mentions of one line; past it the paths are incomplete.
const maxMentions = 32

// stateBuiltins only set the shell's own state from their words (names, values, numbers,
// job ids): none opens a file one names, and `export PATH=$PATH:~/bin` is their common use.
var stateBuiltins = map[string]bool{
	"export": true, "declare": true, "typeset": true, "local": true, "readonly": true,
	"unset": true, "set": true, "shift": true, "exit": true, "return": true, "wait": true,
	"umask": true, "ulimit": true, "times": true, "shopt": true, "setopt": true, "unsetopt": true,
	"kill": true, "jobs": true, "fg": true, "bg": true, "disown": true, "break": true,
	"continue": true, "logout": true, "unalias": true, "unfunction": true, "let": true,
}

// namesFromList reports a program that reads the names of the files it reads from a list
// file or stdin: tar -T/--files-from, zip -@ and -i@, cpio -o and -p, rsync --files-from,
// 7z's @listfile, and --files0-from anywhere.
func namesFromList(name string, args []word) bool {
	vals := staticVals(args)
	switch name {
	case "tar", "gtar", "bsdtar":
		if hasFlag(vals, "T", "files-from") {
			return true
		}
	case "zip":
		for _, v := range vals {
			if v == "-@" || strings.HasPrefix(v, "-i@") || strings.HasPrefix(v, "-x@") || v == "--names-stdin" {
				return true
			}
		}
	case "cpio":
		return hasFlag(vals, "op", "create", "pass-through")
	case "7z", "7za", "7zr":
		for _, v := range vals {
			if strings.HasPrefix(v, "@") || strings.HasPrefix(v, "-i@") || strings.HasPrefix(v, "-x@") {
				return true
			}
		}
	}
	for _, v := range vals {
		if strings.HasPrefix(v, "--files-from") || strings.HasPrefix(v, "--files0-from") {
			return true
		}
	}
	return false
}

// mentionsOf adds the mentions of one command's words (args: past its name). unknown says no
// table knows what its operands are (no path spec, or an interpreter, whose operands past the
// script are the script's): each word is then a path, read and written, and a word known only
// at run time makes the paths incomplete. Otherwise only the paths inside words its spec does
// not take apart count (curl -d @FILE), as reads. Read-only commands are fully described by
// their tables, and a command running a script the classifier read (bash -c) by that script.
func (pc *pathCollector) mentionsOf(sb *sub, name string, args []word, unknown bool) {
	if _, ro := readOnly[name]; ro || sb.nested != nil && !sb.tails || stateBuiltins[name] {
		return
	}
	pc.mentionWords(sb, name, args, unknown)
}

// mentionWords is mentionsOf for a command whose words it should read whatever its name:
// git's subcommands that no table describes (gitPaths).
func (pc *pathCollector) mentionWords(sb *sub, name string, args []word, unknown bool) {
	if unknown && namesFromList(name, args) {
		// tar -T LIST, zip -@, cpio -o: the files it reads are named in a list or on stdin,
		// which no word of the line shows (echo ~/.ssh/id_rsa | tar cf - -T -).
		pc.unknown()
	}
	access := AccessRead
	if unknown && pc.opts.Unconfined {
		access = AccessWrite
	}
	trees := unknown && readsTrees(name, args)
	// In the sandbox (Options.MentionReads) the kernel holds every write and every other
	// read rule: a mention is only a read the rule may meet, no read outside the session by
	// itself, and a word known only at run time is a path known only at run time, as cat's.
	sandboxed := !pc.opts.Unconfined
	pc.mentioning, pc.alternative = true, sandboxed
	defer func() { pc.mentioning, pc.alternative = false, false }()
	var treeWords []word
	defer func() {
		if len(treeWords) > 0 && (name == "rsync" || name == "scp") {
			// rsync -a new/ src/: the last operand gets a copy of each tree, over what it
			// holds, and what one source holds lands there (PathUse.TreeOf).
			last := treeWords[len(treeWords)-1]
			pc.tree, pc.mentioning = false, false
			put := func() { pc.writingTrees(true, func() { pc.add(last.val, AccessWrite, name, sb.dirs, sb.dirsUnknown) }) }
			put()
			for _, src := range treeWords[:len(treeWords)-1] {
				pc.landing(true, src, sb, put)
			}
		}
	}()
	for _, a := range args {
		if !a.static || a.glob {
			switch {
			case unknown && sandboxed:
				pc.runtimeWord(a, sb) // a glob in the session is bounded by it
			case unknown:
				pc.unknown()
			}
			continue
		}
		v := a.val
		if unknown {
			if strings.HasPrefix(v, "-") {
				v = optionValue(v) // --file=PATH, -CDIR; a bare option names nothing
			}
			if fileWord(v) {
				pc.mention(v, access, name, sb)
				if trees {
					pc.treeRead(v, name, sb)
					treeWords = append(treeWords, word{val: v, src: v, static: true})
				}
			}
			if _, val, ok := strings.Cut(v, "="); ok && fileWord(val) {
				pc.mention(val, access, name, sb) // make OUT=dir, if=dir/f
			}
		}
		for rest := a.val; rest != ""; {
			var p string
			p, rest = nextEmbeddedPath(rest)
			if p != "" && !(unknown && p == v) {
				pc.mention(p, access, name, sb)
			}
		}
	}
	// A script on stdin (`python3 - <<EOF`, `perl <<< '...'`) names paths as -c's text does.
	for _, r := range sb.redirs {
		for rest := r.body; rest != ""; {
			var p string
			if p, rest = nextEmbeddedPath(rest); p != "" {
				pc.mention(p, access, name, sb)
			}
		}
	}
}

// staticVals are the values of the words of args known before the line runs.
func staticVals(args []word) []string {
	vals := make([]string, 0, len(args))
	for _, a := range args {
		if a.static {
			vals = append(vals, a.val)
		}
	}
	return vals
}

// readsTrees reports whether a command reads each directory it is given whole, to pack it or
// send it elsewhere: tar c/r/u, zip -r, rsync -r/-a, scp -r, 7z a/u. Its words are then also
// whole-tree reads, as cp -r's sources are (PathUse.Tree): a Read deny rule below one holds it,
// so `tar cf - ~` under Read(~/.ssh/**) is refused as `grep -r x ~` is.
func readsTrees(name string, args []word) bool {
	vals := staticVals(args)
	switch name {
	case "tar", "gtar", "bsdtar":
		if len(vals) > 0 && !strings.HasPrefix(vals[0], "-") && strings.ContainsAny(vals[0], "cru") {
			return true // the old style: tar czf out.tgz dir
		}
		return hasFlag(vals, "cru", "create", "append", "update", "catenate", "concatenate")
	case "zip":
		return hasFlag(vals, "rR", "recurse-paths", "recurse-patterns")
	case "rsync":
		return hasFlag(vals, "ra", "recursive", "archive")
	case "scp":
		return hasFlag(vals, "r")
	case "7z", "7za", "7zr":
		return slices.Contains(vals, "a") || slices.Contains(vals, "u")
	}
	return false
}

// treeRead adds p as a read of everything below it (PathUse.Tree).
func (pc *pathCollector) treeRead(p, cmd string, sb *sub) {
	pc.tree, pc.mentioning = true, false
	defer func() { pc.tree, pc.mentioning = false, true }()
	pc.add(p, AccessRead, cmd, sb.dirs, sb.dirsUnknown)
}

// optionValue is the value an option word carries: after the = of --name=VALUE or -n=VALUE,
// else after the letters of a short option that starts a path (-C/dir, -I~/inc, -f./x), else
// "". A cluster's letters and value cannot be told apart further (-xfarchive).
func optionValue(v string) string {
	if _, val, ok := strings.Cut(v, "="); ok {
		return val
	}
	if strings.HasPrefix(v, "--") {
		return ""
	}
	for i := 1; i < len(v); i++ {
		c := v[i]
		if c == '/' || c == '~' || c == '.' {
			return v[i:]
		}
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return ""
		}
	}
	return ""
}

// mention adds one mentioned path, or past maxMentions marks the paths incomplete.
func (pc *pathCollector) mention(p, access, cmd string, sb *sub) {
	if pc.mentions >= maxMentions {
		pc.unknown()
		return
	}
	pc.mentions++
	pc.add(p, access, cmd, sb.dirs, sb.dirsUnknown)
}

// fileWord reports whether a whole word could be a file's name as a program gets it: not
// empty, no URL, nothing a name seldom holds (spaces, quotes, brackets, shell syntax). An awk
// program or a message is then not looked up as a file; a path inside one still counts
// (nextEmbeddedPath).
func fileWord(v string) bool {
	if v == "" || len(v) > 4096 || strings.Contains(v, "://") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f || strings.IndexByte(" {}()$;|&<>*?[]\"'`\\", c) >= 0 {
			return false
		}
	}
	return true
}

// pathEnd ends a path inside a word: what quotes it, separates it from the next or is code.
const pathEnd = " \t\n\r\"'`:,;()[]{}<>|&$\\*?!=@\x00"

// nextEmbeddedPath finds the next absolute, ~/, ./ or ../ path that starts a word or follows
// one of pathEnd's bytes (a quote, =, @, a colon of a PATH list), up to the next such byte, and
// returns it with what follows it. A // (a URL's host) is not a path.
func nextEmbeddedPath(s string) (p, rest string) {
	for i := 0; i < len(s); i++ {
		if i > 0 && strings.IndexByte(pathEnd, s[i-1]) < 0 {
			continue
		}
		t := s[i:]
		if !(strings.HasPrefix(t, "/") || strings.HasPrefix(t, "~/") || strings.HasPrefix(t, "./") || strings.HasPrefix(t, "../")) {
			continue
		}
		n := strings.IndexAny(t, pathEnd)
		if n < 0 {
			n = len(t)
		}
		if strings.HasPrefix(t, "//") {
			return "", t[n:]
		}
		return t[:n], t[n:]
	}
	return "", ""
}
