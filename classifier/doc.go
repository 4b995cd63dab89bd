// Package classifier turns a Bash command line into a Classification: its simple commands, whether it is read-only, rule-matching prefixes and risk signals.
package classifier
