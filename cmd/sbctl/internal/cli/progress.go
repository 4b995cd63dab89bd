package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/sandboxd/sandboxd/protocol"
)

// progressDelay is how long a call runs before a terminal shows that it is still running: a
// quick command should look as it does in a shell.
const progressDelay = 2 * time.Second

// progress shows, on a terminal's stderr, that a long call is still running and what the
// daemon says about it (its NDJSON "status" events). When stderr is not a terminal it does
// nothing but pass the output through, so piped output is exactly the command's.
type progress struct {
	mu    sync.Mutex
	tty   io.Writer // nil: not a terminal
	shown bool      // the status line is on screen
	// midLine: the output so far ends inside a line; a status line now would share it, and
	// erasing it would erase the command's text too.
	midLine bool
	start   time.Time
	done    chan struct{}
	wg      sync.WaitGroup
}

func startProgress(e *Env) *progress {
	p := &progress{start: time.Now(), done: make(chan struct{})}
	if f, ok := e.Stderr.(*os.File); ok && isTerminal(f) {
		p.tty = f
		p.wg.Add(1)
		go p.tick()
	}
	return p
}

// isTerminal asks the tty driver for f's settings (TCGETS), as isatty(3) does; syscall alone,
// since golang.org/x/sys/unix would add its init to every sbctl start.
func isTerminal(f *os.File) bool {
	var t syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return errno == 0
}

func (p *progress) tick() {
	defer p.wg.Done()
	t := time.NewTimer(progressDelay)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
			p.mu.Lock()
			if !p.midLine {
				p.clear()
				fmt.Fprintf(p.tty, "sandboxd: running for %s…", time.Since(p.start).Round(time.Second))
				p.shown = true
			}
			p.mu.Unlock()
			t.Reset(time.Second)
		}
	}
}

// clear erases the status line; the caller holds mu.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.tty, "\r\033[K")
		p.shown = false
	}
}

// write passes a chunk of the command's output through, off the status line.
func (p *progress) write(w io.Writer, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty != nil {
		p.clear()
		if s != "" {
			p.midLine = s[len(s)-1] != '\n'
		}
	}
	io.WriteString(w, s)
}

// status shows a daemon event that is not output (on a terminal only).
func (p *progress) status(ev protocol.Event) {
	if p.tty == nil || ev.Data == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if p.midLine {
		fmt.Fprintln(p.tty)
		p.midLine = false
	}
	fmt.Fprintf(p.tty, "sandboxd: %s\n", Visible(ev.Data))
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty != nil {
		p.clear()
	}
}
