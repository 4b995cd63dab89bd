// Package sandbox runs one execution as the calling user inside cgroup-, namespace-, landlock- and seccomp-confined children.
package sandbox
