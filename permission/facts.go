package permission

import "github.com/sandboxd/sandboxd/classifier"

// Access is how a tool touches a path.
type Access string

// Path accesses a tool declares.
const (
	Read  Access = "read"
	Write Access = "write"
)

// PathFact is one path a call touches, resolved (symlinks, `..`, `~`) as the session owner.
type PathFact struct {
	// Requested is the path as the call gave it, made absolute.
	Requested string `json:"requested"`
	// Resolved is the real path after following symlinks as the owner; for a path that does not
	// exist yet, its deepest existing parent resolved plus the rest.
	Resolved string `json:"resolved"`
	Access   Access `json:"access"`
	// Special is set for device, FIFO, socket and /proc paths that are never read.
	Special string `json:"special,omitempty"`
}

// ToolFacts is what a tool's CheckPermissions step reports about one call, for the policy.
type ToolFacts struct {
	Paths  []PathFact                 `json:"paths,omitempty"`
	Bash   *classifier.Classification `json:"bash,omitempty"`
	Domain string                     `json:"domain,omitempty"`
}
