package audit

// QueueDepth is how many records wait for the writer: handed over by Append and
// AppendWritten but not taken yet, plus those Enqueue holds for the next batch. A depth that
// keeps growing means the disk cannot keep up and calls will soon wait on their records.
func (l *Log) QueueDepth() int {
	l.queuedMu.Lock()
	n := len(l.queued)
	l.queuedMu.Unlock()
	return n + len(l.reqs)
}
