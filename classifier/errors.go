package classifier

import "errors"

var (
	// ErrPatternTooLong is returned by ValidateRulePattern for a pattern over
	// MaxRulePatternLen bytes.
	ErrPatternTooLong = errors.New("pattern too long")
	// ErrPatternInvalidUTF8 is returned by ValidateRulePattern for a pattern
	// that is not valid UTF-8.
	ErrPatternInvalidUTF8 = errors.New("pattern is not valid utf-8")
	// ErrPatternControlChar is returned by ValidateRulePattern for a pattern
	// holding a newline or another control or invisible format character.
	ErrPatternControlChar = errors.New("pattern holds a control character")
)
