package classifier

import (
	"slices"
	"strings"
)

// Unpackers: programs that write files whose names come from data the line does not show (an
// archive's members, a patch's headers) into a directory: tar x, unzip, cpio -i, 7z x, patch,
// ar x, jar x, dpkg-deb -x, dpkg -x, unsquashfs, cabextract, unar, gem unpack, python's zipfile
// and tarfile CLIs. One that may write outside that directory (tar -P, unzip -:, cpio -i
// without --no-absolute-filenames) writes where no word shows. Run outside any sandbox (Options.Unconfined), each is a write of
// everything under that directory (PathUse.Tree), as rm -r's operand is: `tar xf evil.tar`
// under Edit(.github/**) may replace .github/workflows/ci.yml, which no word of the line names.
// In the sandbox the kernel holds each member's write, so there nothing is added.

// unpackSpecs are the unpackers' getopt options that take a value, to tell a value from an
// operand.
var unpackSpecs = map[string]optSpec{
	"tar":      {shortArg: "bCfFgHIKLNTVX", longArg: []string{"directory", "file", "files-from", "exclude-from", "use-compress-program", "to-command"}, permute: true},
	"unzip":    {shortArg: "dx", permute: true},
	"cpio":     {shortArg: "CDEFHIMOR", longArg: []string{"directory", "file", "pattern-file", "format", "message", "owner", "io-size"}, permute: true},
	"patch":    {shortArg: "BbDdFgioprVYz", longArg: []string{"directory", "input", "output", "strip", "reject-file", "prefix", "suffix", "backup-if-mismatch", "fuzz", "define"}, permute: true},
	"dpkg-deb": {permute: true},
}

// unpackTargets are the directories name writes an archive's or a patch's files under, given
// its words past its name, and whether they are known before the line runs: a word known only
// then may be where it unpacks (tar xf a.tar -C "$d").
func unpackTargets(name string, args []word) (dirs []string, known bool) {
	vals := staticVals(args)
	dirs = unpackDirs(name, vals)
	return dirs, len(dirs) == 0 || len(vals) == len(args) && !slices.Contains(dirs, "")
}

// unpackDirs is unpackTargets of the words vals; "" stands for a directory not known.
func unpackDirs(name string, vals []string) []string {
	switch name {
	case "gtar", "bsdtar":
		name = "tar"
	case "7za", "7zr", "7zz":
		name = "7z"
	case "bsdcpio":
		name = "cpio"
	}
	sp := unpackSpecs[name]
	opts, ops := parseOpts(vals, sp)
	has := func(short string, longs ...string) bool {
		for _, o := range opts {
			if !o.long && strings.Contains(short, o.name) {
				return true
			}
			for _, l := range longs {
				if o.long && longIs(o.name, l) {
					return true
				}
			}
		}
		return false
	}
	values := func(short, long string) []string {
		var out []string
		for _, o := range opts {
			if o.long && longIs(o.name, long) || !o.long && o.name == short {
				out = append(out, o.val)
			}
		}
		return out
	}
	lastOperand := func() []string {
		if len(ops) == 0 {
			return nil
		}
		return ops[len(ops)-1:]
	}
	switch {
	case name == "tar":
		if len(vals) > 0 && !strings.HasPrefix(vals[0], "-") {
			// The old style: tar xzf a.tgz, whose first word's letters take values from the
			// next words in order (tar f a.tar -x too), so where a C's value is cannot be
			// told here.
			opts, _ = parseOpts(vals[1:], sp)
			if !strings.Contains(vals[0], "x") && !has("x", "extract", "get") {
				return nil
			}
			if strings.Contains(vals[0], "C") {
				return []string{""}
			}
		} else if !has("x", "extract", "get") {
			return nil
		}
		return orCwd(values("C", "directory"))
	case name == "unzip":
		if has("ltvzpZ") {
			return nil // lists, tests or prints
		}
		return orCwd(values("d", ""))
	case name == "cpio":
		if has("p", "pass-through") {
			return lastOperand()
		}
		if !has("i", "extract") {
			return nil
		}
		return orCwd(values("D", "directory"))
	case name == "patch":
		return orCwd(values("d", "directory"))
	case name == "7z":
		if len(ops) == 0 || ops[0] != "x" && ops[0] != "e" {
			return nil
		}
		var out []string
		for _, v := range vals {
			if strings.HasPrefix(v, "-o") {
				out = append(out, v[2:])
			}
		}
		return orCwd(out)
	case name == "ar" || name == "jar":
		if len(vals) == 0 || !strings.Contains(strings.TrimLeft(vals[0], "-"), "x") && !(name == "jar" && hasFlag(vals, "", "extract")) {
			return nil
		}
		return []string{"."}
	case name == "pax":
		if !has("r") {
			return nil
		}
		if has("w") {
			return lastOperand()
		}
		return []string{"."}
	case name == "dpkg-deb":
		if !has("xXR", "extract", "vextract", "raw-extract") {
			return nil
		}
		return lastOperand()
	case strings.HasPrefix(name, "python"):
		return pythonUnpacks(vals)
	case name == "unsquashfs":
		for i, v := range vals {
			if (v == "-d" || v == "-dest") && i+1 < len(vals) {
				return []string{vals[i+1]}
			}
		}
		return []string{"squashfs-root"}
	case name == "dpkg":
		if len(vals) > 2 && (vals[0] == "-x" || vals[0] == "--extract" || vals[0] == "-X" || vals[0] == "--vextract") {
			return vals[len(vals)-1:]
		}
		return nil
	case name == "cabextract" || name == "unar":
		var out []string
		for i, v := range vals {
			switch {
			case (v == "-d" || v == "-o" || v == "--directory" || v == "-output-directory") && i+1 < len(vals):
				out = append(out, vals[i+1])
			case strings.HasPrefix(v, "--directory="):
				out = append(out, strings.TrimPrefix(v, "--directory="))
			}
		}
		return orCwd(out)
	case name == "gem":
		if len(vals) == 0 || vals[0] != "unpack" {
			return nil
		}
		for _, v := range vals {
			if t, ok := strings.CutPrefix(v, "--target="); ok {
				return []string{t}
			}
		}
		if slices.Contains(vals, "--target") {
			return []string{""}
		}
		return []string{"."}
	case name == "unrar":
		if len(ops) == 0 || ops[0] != "x" && ops[0] != "e" {
			return nil
		}
		if d := ops[len(ops)-1]; len(ops) > 2 && strings.HasSuffix(d, "/") {
			return []string{d} // unrar x a.rar dest/
		}
		return []string{"."}
	}
	return nil
}

// pythonUnpacks is where python's zipfile or tarfile CLI extracts (python3 -m zipfile -e A
// [DIR], -mtarfile -ve A): the second word after -e, else the cwd; none when it does not.
func pythonUnpacks(vals []string) []string {
	for i, v := range vals {
		module := ""
		switch {
		case v == "-m" && i+1 < len(vals):
			module = vals[i+1]
		case strings.HasPrefix(v, "-m"):
			module = v[2:]
		}
		if module != "zipfile" && module != "tarfile" {
			continue
		}
		for j, w := range vals[i+1:] {
			if w == "--extract" || len(w) > 1 && w[0] == '-' && w[1] != '-' && strings.Contains(w, "e") {
				var ops []string
				for _, o := range vals[i+2+j:] {
					if !strings.HasPrefix(o, "-") {
						ops = append(ops, o)
					}
				}
				return orCwd(ops[min(1, len(ops)):min(2, len(ops))])
			}
		}
		return nil
	}
	return nil
}

// unpacksAnywhere reports an unpacker that may write outside the directories it unpacks in:
// tar and bsdtar -P (absolute and ../ names kept) or with --transform (names rewritten by the
// line), unzip -: (../ kept), GNU cpio -i without --no-absolute-filenames (it keeps them by
// default), pax, and python's tarfile CLI (no extraction filter before Python 3.14).
func unpacksAnywhere(name string, vals []string) bool {
	switch name {
	case "tar", "gtar", "bsdtar":
		return hasFlag(vals, "P", "absolute-names", "transform", "xform") ||
			len(vals) > 0 && !strings.HasPrefix(vals[0], "-") && strings.Contains(vals[0], "P")
	case "unzip":
		return slices.Contains(vals, "-:") || slices.ContainsFunc(vals, func(v string) bool {
			return strings.HasPrefix(v, "-") && !strings.HasPrefix(v, "--") && strings.Contains(v, ":")
		})
	case "cpio", "bsdcpio":
		return !hasFlag(vals, "", "no-absolute-filenames")
	case "pax":
		return true
	}
	return strings.HasPrefix(name, "python") && slices.Contains(vals, "tarfile")
}

// orCwd is dirs, or the cwd when it names none.
func orCwd(dirs []string) []string {
	if len(dirs) == 0 {
		return []string{"."}
	}
	return dirs
}

// unpacks adds the directories an unpacker writes under as whole-tree writes (see above).
func (pc *pathCollector) unpacks(sb *sub, name string, args []word) {
	dirs, known := unpackTargets(name, args)
	if !known || len(dirs) > 0 && unpacksAnywhere(name, staticVals(args)) {
		pc.unknown()
		return
	}
	pc.unpacked = true
	pc.writingTrees(true, func() {
		for _, d := range dirs {
			pc.add(d, AccessWrite, name, sb.dirs, sb.dirsUnknown)
		}
	})
	pc.unpacked = false
}
