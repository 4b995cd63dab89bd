// Package audit is the tamper-evident audit log: hash-chained JSON-lines records, group-committed and fsynced before the effect they describe, with signed checkpoints, rotation, crash recovery, redaction, error classes and offline verify/query/export.
package audit
