package audit

import "sync"

// headWriter publishes signed heads off the writer goroutine. Writing a head is three
// syncs (file, rename, directory): done inline it stalled every batch behind each checkpoint.
// Only the newest head matters, so a head not yet written is replaced by a newer one.
type headWriter struct {
	write func(Head)
	kick  chan struct{} // one pending wake-up is enough

	mu      sync.Mutex
	idle    *sync.Cond // signalled when next is nil and nothing is being written
	next    *Head
	writing bool
	stopped chan struct{}
}

func newHeadWriter(write func(Head)) *headWriter {
	h := &headWriter{write: write, kick: make(chan struct{}, 1), stopped: make(chan struct{})}
	h.idle = sync.NewCond(&h.mu)
	go h.loop()
	return h
}

// publish queues hd, replacing a head that is still waiting.
func (h *headWriter) publish(hd Head) {
	h.mu.Lock()
	h.next = &hd
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *headWriter) loop() {
	defer close(h.stopped)
	for range h.kick {
		for {
			h.mu.Lock()
			hd := h.next
			h.next = nil
			h.writing = hd != nil
			if hd == nil {
				h.idle.Broadcast()
				h.mu.Unlock()
				break
			}
			h.mu.Unlock()
			h.write(*hd)
		}
	}
}

// flush returns once every published head is written (or its write failed and was logged).
func (h *headWriter) flush() {
	h.mu.Lock()
	for h.next != nil || h.writing {
		h.idle.Wait()
	}
	h.mu.Unlock()
}

// close flushes and stops the goroutine; publish must not be called after it.
func (h *headWriter) close() {
	h.flush()
	close(h.kick)
	<-h.stopped
}
