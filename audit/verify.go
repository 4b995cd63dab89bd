package audit

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sandboxd/sandboxd/protocol"
)

// VerifyOptions says what to check beyond the hash chain.
type VerifyOptions struct {
	// PublicKey checks every checkpoint signature and the head; nil checks the chain only
	// (a chain alone proves order and integrity, not that nobody rewrote all of it).
	PublicKey ed25519.PublicKey
	// Head is the head.json to check the log against ("" for none; required with PublicKey).
	// It catches a truncated tail and a rewritten chain.
	Head string
	// PreviousKeys are keys that signed the log before a key replacement (audit.key_replaced):
	// the checkpoints that name them are checked with them. Without them such checkpoints
	// cannot be checked, and Verify fails with ErrKeyReplaced.
	PreviousKeys []ed25519.PublicKey
}

// keyFor is the key given for checkpoints that name key id (none: the public key), or nil.
func (o VerifyOptions) keyFor(id string) ed25519.PublicKey {
	if id == "" || id == KeyID(o.PublicKey) {
		return o.PublicKey
	}
	for _, k := range o.PreviousKeys {
		if KeyID(k) == id {
			return k
		}
	}
	return nil
}

// VerifyReport describes what Verify saw and, on failure, the first bad place. It is the
// wire type itself: a report goes to clients as it is.
type VerifyReport = protocol.VerifyReport

// VerifyDir verifies the log files of dir against dir/head.json. With pub nil only the chain
// is checked (and the head's hash, if a head is there).
func VerifyDir(dir string, pub ed25519.PublicKey) (*VerifyReport, error) {
	return VerifyDirOptions(dir, VerifyOptions{PublicKey: pub})
}

// VerifyDirOptions is VerifyDir with options; opt.Head is dir/head.json, if there is one.
func VerifyDirOptions(dir string, opt VerifyOptions) (*VerifyReport, error) {
	files, err := ListFiles(dir)
	if err != nil {
		return nil, err
	}
	opt.Head = ""
	head := filepath.Join(dir, headFile)
	if _, err := os.Stat(head); err == nil {
		opt.Head = head
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("stat audit head: %w", err)
	}
	return Verify(files, opt)
}

// Verify checks files (in chain order) offline: every line's hash, seq and prev links across
// files, rotation markers, checkpoint signatures and the signed head. An intact log returns a
// nil error. Otherwise the error wraps ErrTampered (or ErrTornTail, ErrNoHead, ErrCutBack) and
// the report names the first bad record and why; or, with no record bad, ErrKeyReplaced for
// checkpoints of a replaced key it was not given. It reads only the given files, so it works on
// a copy.
func Verify(files []string, opt VerifyOptions) (*VerifyReport, error) {
	rep := &VerifyReport{Files: files, Signed: opt.PublicKey != nil}
	var head *Head
	if opt.Head != "" {
		h, err := ReadHead(opt.Head)
		if err != nil {
			return rep, err
		}
		if opt.PublicKey != nil && !verifyHeadSig(opt.PublicKey, h) {
			why := "head signature does not verify"
			switch {
			case h.V < headVersion && verifySig(opt.PublicKey, h.Seq, h.Hash, h.Sig):
				why = fmt.Sprintf("head is signed in the version %d form, which a checkpoint's signature can forge, so it cannot show the tail is whole; "+
					"start this log's daemon (its first checkpoint signs a new head) and copy the log again", h.V)
			case h.Key != "" && h.Key != KeyID(opt.PublicKey):
				why = fmt.Sprintf("head signature does not verify: the head names key %s, the public key given is %s", h.Key, KeyID(opt.PublicKey))
			}
			return rep, fail(rep, opt.Head, 0, h.Seq, why, ErrTampered)
		}
		head, rep.HeadSeq = h, h.Seq
	} else if opt.PublicKey != nil {
		return rep, ErrNoHead
	}
	headSeen := false
	// signedTo is the last seq a verified signature covers: a checkpoint's (it signs what
	// precedes it and holds nothing else) or the head's.
	var signedTo uint64
	// cut is the first audit.cut_back: the chain after it is whole, so the scan reads on and
	// fails on it only if nothing worse turns up.
	var cut *place
	// A checkpoint the public key did not sign (one a previous key signed, or one naming a key
	// not given) stands only if a later audit.key_replaced accounts for it and a signature of
	// the public key covers that record; else it is a forger's. notGiven is the first since the
	// last replacement, notChecked how many of them no key given could check (notCheckedKey
	// names the first one's key); replaced is the last replacement that accounted for any, and
	// givenTo the last seq a signature of the public key covers.
	var notGiven, replaced *place
	notChecked, notCheckedKey := 0, ""
	var givenTo uint64
	var keyWhy string // ErrKeyReplaced's reason
	for fi, path := range files {
		f, err := openRead(path)
		if err != nil {
			return rep, err
		}
		lineNo := 0
		var bad error
		_, tail, err := scanLines(f, func(line []byte, _ int64) error {
			lineNo++
			next := rep.LastSeq + 1
			r, perr := parseLine(line)
			if perr != nil {
				return fail(rep, path, lineNo, next, perr.Error(), ErrTampered)
			}
			fail := func(why string) error { return fail(rep, path, lineNo, r.Seq, why, ErrTampered) }
			firstOfFile := lineNo == 1
			switch {
			case rep.Records == 0 && r.Seq == 1 && fi == 0:
				if r.Prev != "" {
					return fail("first record has a prev hash")
				}
			case rep.Records == 0:
				// Retention removed the start: the log must begin at a rotation marker.
				if r.Kind != KindRotate || !firstOfFile || r.Detail["prev_hash"] != r.Prev {
					return fail("log does not start at seq 1 or at a rotation")
				}
				rep.Pruned, rep.FirstSeq = true, r.Seq
			default:
				if r.Seq != next {
					return fail(fmt.Sprintf("seq %d follows %d", r.Seq, rep.LastSeq))
				}
				if r.Prev != rep.LastHash {
					return fail("prev does not match the previous record's hash")
				}
			}
			if rep.Records == 0 && !rep.Pruned {
				rep.FirstSeq = r.Seq
			}
			if firstOfFile && fi > 0 && rep.Records > 0 {
				if r.Kind != KindRotate || r.Detail["prev_file"] != filepath.Base(files[fi-1]) ||
					r.Detail["prev_hash"] != rep.LastHash || r.Detail["prev_seq"] != strconv.FormatUint(rep.LastSeq, 10) {
					return fail("file does not start with a rotation naming the previous file")
				}
			} else if r.Kind == KindRotate && !firstOfFile {
				return fail("rotation record in the middle of a file")
			}
			switch r.Kind {
			case KindCheckpoint:
				rep.Checkpoints++
				if r.Detail["signed_seq"] != strconv.FormatUint(rep.LastSeq, 10) || r.Detail["signed_hash"] != rep.LastHash {
					return fail("checkpoint does not sign the record before it")
				}
				if opt.PublicKey == nil {
					break
				}
				id := r.Detail["key"]
				switch pub := opt.keyFor(id); {
				case pub == nil:
					if notChecked == 0 {
						notCheckedKey = id
					}
					notChecked++
					if notGiven == nil {
						notGiven = &place{path, lineNo, r.Seq, fmt.Sprintf("checkpoint signed by key %s, not the public key given (%s), and no key replacement follows it",
							id, KeyID(opt.PublicKey))}
					}
				case !verifySig(pub, rep.LastSeq, rep.LastHash, r.Detail["sig"]):
					return fail("checkpoint signature does not verify")
				case pub.Equal(opt.PublicKey):
					signedTo, givenTo = r.Seq, r.Seq
				default:
					signedTo = r.Seq
					if notGiven == nil {
						notGiven = &place{path, lineNo, r.Seq, fmt.Sprintf("checkpoint signed by the previous key %s, and no key replacement follows it", id)}
					}
				}
			case KindKeyReplaced:
				rep.KeyReplacements++
				if notGiven != nil {
					replaced = &place{path, lineNo, r.Seq, "the key replacement that accounts for the checkpoints before it is signed by no checkpoint or head of the public key given"}
				}
				if notChecked > 0 && keyWhy == "" {
					keyWhy = fmt.Sprintf("the signing key was replaced at seq %d (the daemon found no key at start and made key %s): %d checkpoints before it were signed by key %s, "+
						"which was not given, so the records they cover are held by the chain alone; give that key's public key too (sbctl audit verify --old-pubkey) to check them",
						r.Seq, r.Detail["key"], notChecked, notCheckedKey)
				}
				rep.UncheckedCheckpoints += notChecked
				notGiven, notChecked = nil, 0
			case KindTornTail:
				rep.TornTails++
			case KindCutBack:
				rep.CutBacks++
				if cut == nil {
					cut = &place{path, lineNo, r.Seq, cutBackWhy(r.Detail)}
				}
			default:
				if !r.Kind.Known() {
					return fail(fmt.Sprintf("unknown kind %q", r.Kind))
				}
			}
			if head != nil && r.Seq == head.Seq {
				if r.Hash != head.Hash {
					return fail("record differs from the signed head")
				}
				headSeen = true
				if opt.PublicKey != nil {
					signedTo, givenTo = max(signedTo, r.Seq), r.Seq
				}
			}
			rep.Records++
			rep.LastSeq, rep.LastHash = r.Seq, r.Hash
			return nil
		})
		f.Close()
		if err != nil {
			if errors.Is(err, ErrTampered) {
				bad = err
			} else {
				return rep, err
			}
		}
		if bad != nil {
			return rep, bad
		}
		if len(tail) > 0 {
			return rep, fail(rep, path, lineNo+1, rep.LastSeq+1,
				fmt.Sprintf("incomplete last line (%d bytes)", len(tail)), ErrTornTail)
		}
		if lineNo == 0 && fi != len(files)-1 {
			return rep, fail(rep, path, 0, rep.LastSeq+1, "empty file in the middle of the log", ErrTampered)
		}
	}
	if head != nil && !headSeen {
		if head.Seq > rep.LastSeq {
			return rep, fail(rep, opt.Head, 0, rep.LastSeq+1,
				fmt.Sprintf("log ends at seq %d but the signed head is seq %d: truncated", rep.LastSeq, head.Seq), ErrTampered)
		}
		return rep, fail(rep, opt.Head, 0, head.Seq, "signed head precedes the retained log", ErrTampered)
	}
	if opt.PublicKey != nil {
		// Whoever holds the files can extend the chain past the last signature without the
		// key; such records are no tampering with signed ones, but they are not proven either.
		rep.Unsigned = rep.LastSeq - signedTo
	}
	if notGiven != nil {
		return rep, fail(rep, notGiven.file, notGiven.line, notGiven.seq, notGiven.why, ErrTampered)
	}
	if replaced != nil && replaced.seq > givenTo {
		return rep, fail(rep, replaced.file, replaced.line, replaced.seq, replaced.why, ErrTampered)
	}
	if cut != nil {
		return rep, fail(rep, cut.file, cut.line, cut.seq, cut.why, ErrCutBack)
	}
	if keyWhy != "" {
		// No record is bad: the report names none, and the error says what was not checked.
		return rep, fmt.Errorf("%s: %w", keyWhy, ErrKeyReplaced)
	}
	return rep, nil
}

// place is a record Verify fails on once the whole log is read.
type place struct {
	file string
	line int
	seq  uint64
	why  string
}

// cutBackWhy says what an audit.cut_back record found when the daemon started.
func cutBackWhy(d map[string]string) string {
	var why string
	switch d["reason"] {
	case cutShort:
		why = fmt.Sprintf("the log was cut back from seq %s to %s while the daemon was down", d["head_seq"], d["last_seq"])
	case cutRewritten:
		why = fmt.Sprintf("the record at the signed head's seq %s was missing or another one when the daemon started (the log ended at seq %s): the log was rewritten while the daemon was down",
			d["head_seq"], d["last_seq"])
	case cutRemoved:
		why = "every log file was gone when the daemon started, though its signing key was there: the log was removed while the daemon was down"
		if d["head_seq"] != "" {
			why = fmt.Sprintf("the log was cut back from seq %s to nothing while the daemon was down: every log file was gone", d["head_seq"])
		}
	case cutHeadMissing:
		why = fmt.Sprintf("the signed head was gone when the daemon started, with the log at seq %s and signed checkpoints in it: records after the last checkpoint may have been cut while the daemon was down",
			d["last_seq"])
	default:
		why = "the log did not reach its signed head when the daemon started"
	}
	if sig := d["head_signature"]; sig != "" && sig != "valid" {
		why += " (that head's signature: " + sig + ")"
	}
	return why + " (audit.cut_back)"
}

// fail records the first bad place in rep and returns the error that names it.
func fail(rep *VerifyReport, file string, line int, seq uint64, why string, kind error) error {
	rep.BadFile, rep.BadLine, rep.BadSeq, rep.Reason = file, line, seq, why
	return fmt.Errorf("%s line %d (seq %d): %s: %w", filepath.Base(file), line, seq, why, kind)
}
