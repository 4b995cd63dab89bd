// Package executor owns the Tool type, the registry and tool pool, the 14-step call pipeline, batching and result budgeting.
package executor
