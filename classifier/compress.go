package classifier

import (
	"strings"
)

// Compressors: gzip, xz, zstd and their kin replace each file they are given with one whose
// name they make from it (x -> x.gz, .envrc.gz -> .envrc), and with -r every file below a
// directory they are given. Run outside any sandbox (Options.Unconfined), the made names are
// writes as any named file is (`gunzip .envrc.gz` writes .envrc, a protected file), a
// recursive one a whole-tree write (`gzip -r .` replaces .git/HEAD and .github/…), and so is
// each directory an archiver removes once packed (tar --remove-files, zip -rm, 7z -sdel). In
// the sandbox the kernel holds each write, so nothing is added there.

// compressorSuffix is each compressor's default suffix; "" for one that only decompresses.
var compressorSuffix = map[string]string{
	"gzip": ".gz", "pigz": ".gz", "gunzip": ".gz", "unpigz": ".gz",
	"bzip2": ".bz2", "bunzip2": ".bz2", "pbzip2": ".bz2", "lbzip2": ".bz2",
	"xz": ".xz", "unxz": ".xz", "lzma": ".lzma", "unlzma": ".lzma",
	"zstd": ".zst", "zstdmt": ".zst", "unzstd": ".zst",
	"lz4": ".lz4", "unlz4": ".lz4", "brotli": ".br", "lzip": ".lz", "lzop": ".lzo",
}

// decompressedSuffixes are the suffixes a decompressor takes off a name (and what .tgz and its
// kin become).
var decompressedSuffixes = []struct{ from, to string }{
	{".tgz", ".tar"}, {".taz", ".tar"}, {".tbz2", ".tar"}, {".tbz", ".tar"}, {".txz", ".tar"}, {".tzst", ".tar"},
	{".gz", ""}, {".z", ""}, {".Z", ""}, {"-gz", ""}, {"-z", ""}, {"_z", ""}, {".bz2", ""}, {".bz", ""},
	{".xz", ""}, {".lzma", ""}, {".zst", ""}, {".lz4", ""}, {".br", ""}, {".lz", ""}, {".lzo", ""},
}

// compressorOpts are the compressors' getopt options that take a value.
var compressorOpts = optSpec{shortArg: "SoBTLbD", longArg: []string{"suffix", "output", "format", "threads", "memlimit",
	"memlimit-compress", "memlimit-decompress", "block-size", "dict", "memory", "patch-from", "window", "quality", "lgwin"}, permute: true}

// compresses adds what a compressor (name) writes that no word of the line names: the files it
// makes from its operands, and the trees below them when it recurses.
func (pc *pathCollector) compresses(sb *sub, name string, args []word) {
	suffix, ok := compressorSuffix[name]
	if !ok {
		pc.removesPacked(sb, name, args)
		return
	}
	vals := staticVals(args)
	if len(vals) != len(args) {
		pc.unknown()
		return
	}
	opts, ops := parseOpts(vals, compressorOpts)
	has := func(short string, longs ...string) bool {
		for _, o := range opts {
			if !o.long && strings.Contains(short, o.name) || o.long && anyLong(o.name, longs) {
				return true
			}
		}
		return false
	}
	decompress := strings.HasPrefix(name, "un") || name == "gunzip" || has("d", "decompress", "uncompress")
	if has("ctlh", "stdout", "to-stdout", "test", "list", "help") {
		return // to stdout, or nothing written
	}
	for _, o := range opts {
		if o.hasVal && (o.name == "S" || o.long && longIs(o.name, "suffix")) {
			suffix = o.val
		}
	}
	recursive := has("r", "recursive")
	for _, op := range ops {
		if op == "-" {
			continue
		}
		switch {
		case recursive:
			pc.writingTrees(true, func() { pc.add(op, AccessWrite, name, sb.dirs, sb.dirsUnknown) })
			if decompress {
				pc.unknown() // gzip -dr . makes .envrc of a .envrc.gz below: names no word shows
			}
		case decompress && has("N", "name"):
			pc.unknown() // the name stored in the file
		case decompress:
			if out, ok := decompressedName(op, suffix); ok {
				pc.add(out, AccessWrite, name, sb.dirs, sb.dirsUnknown)
			}
		default:
			pc.add(op+suffix, AccessWrite, name, sb.dirs, sb.dirsUnknown)
		}
	}
}

// decompressedName is the name a decompressor gives what it makes of file, by suffix (or the
// -S one), and whether it makes one.
func decompressedName(file, suffix string) (string, bool) {
	if suffix != "" && len(file) > len(suffix) && strings.HasSuffix(file, suffix) {
		return file[:len(file)-len(suffix)], true
	}
	for _, s := range decompressedSuffixes {
		if len(file) > len(s.from) && strings.HasSuffix(file, s.from) {
			return file[:len(file)-len(s.from)] + s.to, true
		}
	}
	return "", false
}

// removesPacked adds, for an archiver told to remove what it packs (tar --remove-files, zip -m,
// 7z -sdel, zstd and lz4 --rm), each operand as a whole-tree write: a directory packed goes with
// everything below it.
func (pc *pathCollector) removesPacked(sb *sub, name string, args []word) {
	vals := staticVals(args)
	if len(vals) != len(args) {
		return // its words are mentions, a word known only at run time already unknown
	}
	var packed []string
	switch name {
	case "tar", "gtar", "bsdtar":
		if hasFlag(vals, "", "remove-files") {
			_, packed = parseOpts(vals, unpackSpecs["tar"]) // the archive is -f's value
		}
	case "zip":
		if hasFlag(vals, "m", "move") {
			_, ops := parseOpts(vals, optSpec{shortArg: "bnOPtxiZ", permute: true})
			packed = ops[min(1, len(ops)):] // after the archive
		}
	case "7z", "7za", "7zr":
		if strings.Contains(" "+strings.Join(vals, " ")+" ", " -sdel ") {
			_, ops := parseOpts(vals, optSpec{permute: true})
			packed = ops[min(2, len(ops)):] // after the command and the archive
		}
	}
	pc.writingTrees(true, func() {
		for _, p := range packed {
			pc.add(p, AccessWrite, name, sb.dirs, sb.dirsUnknown)
		}
	})
}
