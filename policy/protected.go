package policy

import (
	"fmt"
	"regexp"
)

// ProtectedPathPattern is the embedded safety policy's pattern of protected paths (safety.rego's
// _protected_re): a path it matches is one the policy's protected check asks about when
// written. The daemon uses it to find, among the many files a command may write under names
// no word of it shows (a tree copied in), the few to put to the policy as writes.
func ProtectedPathPattern() (*regexp.Regexp, error) {
	b, err := embedded.ReadFile("rego/safety/safety.rego")
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile("_protected_re := `([^`]*)`").FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("no _protected_re in the embedded safety policy")
	}
	return regexp.Compile(string(m[1]))
}
