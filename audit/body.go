package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// appendBody appends the JSON members of r from kind to detail, without braces: the record
// encoder, byte for byte what encoding/json writes for the same struct (the tests' reference,
// encodeBodyJSON), without reflection. Input is spliced as is when the caller vouches it is
// compact (Redact's output always is) or isCanonical proves it; otherwise it is compacted as
// encoding/json compacts a RawMessage. TestAppendBodyMatchesJSON and FuzzAppendBody keep the
// encoder and the reference in step.
func appendBody(dst []byte, r *Record, inputCompact bool) ([]byte, error) {
	dst = append(dst, `"kind":`...)
	dst = appendJSONString(dst, string(r.Kind))
	if c := r.Caller; c != nil {
		dst = append(dst, `,"caller":{"uid":`...)
		dst = strconv.AppendUint(dst, uint64(c.UID), 10)
		dst = append(dst, `,"gid":`...)
		dst = strconv.AppendUint(dst, uint64(c.GID), 10)
		dst = append(dst, `,"pid":`...)
		dst = strconv.AppendInt(dst, int64(c.PID), 10)
		dst = appendOptString(dst, "user", c.User)
		if c.RangeOwner != 0 {
			dst = append(dst, `,"range_owner":`...)
			dst = strconv.AppendUint(dst, uint64(c.RangeOwner), 10)
		}
		dst = append(dst, '}')
	}
	dst = appendOptString(dst, "session", r.Session)
	dst = appendOptString(dst, "mode", r.Mode)
	dst = appendOptString(dst, "tool", r.Tool)
	dst = appendOptString(dst, "tool_use_id", r.ToolUseID)
	if len(r.Input) > 0 {
		dst = append(dst, `,"input":`...)
		if inputCompact || isCanonical(r.Input) {
			dst = append(dst, r.Input...)
		} else {
			var buf bytes.Buffer
			if err := json.Compact(&buf, r.Input); err != nil {
				return nil, fmt.Errorf("encode record: input: %w", err)
			}
			dst = append(dst, buf.Bytes()...)
		}
	}
	dst = appendOptString(dst, "input_digest", r.InputDigest)
	if d := r.Decision; d != nil {
		dst = append(dst, `,"decision":{"behavior":`...)
		dst = appendJSONString(dst, d.Behavior)
		dst = appendOptString(dst, "reason", d.Reason)
		dst = appendOptString(dst, "rule", d.Rule)
		dst = appendOptString(dst, "source", d.Source)
		dst = appendOptString(dst, "step", d.Step)
		dst = append(dst, '}')
	}
	if o := r.Outcome; o != nil {
		dst = append(dst, `,"outcome":{"exit_code":`...)
		dst = strconv.AppendInt(dst, int64(o.ExitCode), 10)
		dst = appendOptString(dst, "signal", o.Signal)
		dst = append(dst, `,"duration_ms":`...)
		dst = strconv.AppendInt(dst, o.DurationMS, 10)
		dst = appendOptInt(dst, "cpu_ms", o.CPUMS)
		dst = appendOptInt(dst, "peak_memory_bytes", o.PeakMemoryBytes)
		dst = appendOptTrue(dst, "oom", o.OOM)
		dst = appendOptTrue(dst, "timeout", o.Timeout)
		dst = appendOptTrue(dst, "pids_limit", o.PidsLimit)
		dst = appendOptInt(dst, "output_bytes", o.OutputBytes)
		dst = appendOptString(dst, "persisted_path", o.PersistedPath)
		dst = appendOptString(dst, "task_id", o.TaskID)
		if len(o.MovedAside) > 0 {
			dst = append(dst, `,"moved_aside":[`...)
			for i, p := range o.MovedAside {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = appendJSONString(dst, p)
			}
			dst = append(dst, ']')
		}
		dst = appendOptInt(dst, "moved_aside_more", o.MovedAsideMore)
		dst = appendOptString(dst, "error", string(o.Error))
		dst = append(dst, '}')
	}
	if len(r.Detail) > 0 {
		keys := make([]string, 0, len(r.Detail))
		for k := range r.Detail {
			keys = append(keys, k)
		}
		slices.Sort(keys) // encoding/json's map key order
		dst = append(dst, `,"detail":{`...)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			dst = appendJSONString(dst, r.Detail[k])
		}
		dst = append(dst, '}')
	}
	return dst, nil
}

// appendOptString appends ,"name":"s" unless s is empty (omitempty). name needs no escaping.
func appendOptString(dst []byte, name, s string) []byte {
	if s == "" {
		return dst
	}
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	return appendJSONString(dst, s)
}

func appendOptInt(dst []byte, name string, v int64) []byte {
	if v == 0 {
		return dst
	}
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	dst = append(dst, `":`...)
	return strconv.AppendInt(dst, v, 10)
}

func appendOptTrue(dst []byte, name string, v bool) []byte {
	if !v {
		return dst
	}
	dst = append(dst, `,"`...)
	dst = append(dst, name...)
	return append(dst, `":true`...)
}

const lowerHex = "0123456789abcdef"

// appendJSONString appends s quoted the way encoding/json does with HTML escaping off:
// quote and backslash escaped, control characters as \b \f \n \r \t or \u00XX, invalid UTF-8
// as \ufffd, and U+2028/U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[c>>4], lowerHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(dst, s[start:]...), '"')
}

// bodySizeHint is a capacity that holds a typical body without growing: the fixed members
// come to a few hundred bytes, plus the variable ones.
func bodySizeHint(r *Record) int {
	n := 512 + len(r.Input) + len(r.Session) + len(r.ToolUseID)
	if r.Outcome != nil {
		n += len(r.Outcome.PersistedPath)
		for _, p := range r.Outcome.MovedAside {
			n += len(p) + 3
		}
	}
	for k, v := range r.Detail {
		n += len(k) + len(v) + 8
	}
	return n
}
