package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/sandboxd/sandboxd/client"
	"github.com/sandboxd/sandboxd/protocol"
)

// rememberSources are where `approve --remember` may add the rule (never an admin source).
var rememberSources = map[string]bool{"session": true, "localSettings": true, "userSettings": true}

func cmdApprovals(e *Env, args []string) error {
	fs := NewFlags(e, "approvals")
	watch := fs.Bool("watch", false, "follow the approvals as they arrive and leave; on a terminal, answer with y/n/a")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return UsageError("usage: sbctl approvals [--watch] [--json]")
	}
	jsonOut := e.JSON // with --watch: one event per line
	if *watch {
		return watchApprovals(e, jsonOut)
	}
	list, err := e.Client().Approvals(e.Ctx)
	if err != nil {
		return err
	}
	if jsonOut {
		if list == nil {
			list = []protocol.Approval{}
		}
		return PrintJSON(e.Stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(e.Stderr, "no pending approvals")
		return nil
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOOL\tSESSION\tEXPIRES\tCALL\tREASON")
	for _, a := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.ID, Visible(a.Tool), sessionLabel(a), until(a.Expires), Clip(inputSummary(a), 60), Clip(a.Reason, 80))
	}
	return tw.Flush()
}

func cmdApprove(e *Env, args []string) error {
	fs := NewFlags(e, "approve")
	remember := fs.String("remember", "", "also allow it next time: add the suggested rule to session, localSettings or userSettings")
	rule := fs.String("rule", "", "with --remember: add only this one of the suggested rules (default: all of them)")
	pos, err := ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return UsageError("usage: sbctl approve ID [--remember session|localSettings|userSettings] [--rule RULE]")
	}
	if *remember != "" && !rememberSources[*remember] {
		return UsageError(fmt.Sprintf("--remember %q: want session, localSettings or userSettings", *remember))
	}
	if *rule != "" && *remember == "" {
		return UsageError("--rule needs --remember: say where to add it")
	}
	return answer(e, pos[0], protocol.ApprovalAnswer{Answer: protocol.Allow, Remember: *remember, Rule: *rule})
}

func cmdDeny(e *Env, args []string) error {
	fs := NewFlags(e, "deny")
	msg := fs.String("message", "", "why, passed back to the agent")
	pos, err := ParseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return UsageError("usage: sbctl deny ID [--message M]")
	}
	return answer(e, pos[0], protocol.ApprovalAnswer{Answer: protocol.Deny, Message: *msg})
}

func answer(e *Env, id string, a protocol.ApprovalAnswer) error {
	res, err := e.Client().AnswerApproval(e.Ctx, id, a)
	if err != nil {
		return err
	}
	if e.JSON {
		return PrintJSON(e.Stdout, res)
	}
	fmt.Fprintln(e.Stdout, resolutionLine(res.Approval, res.Resolution))
	return nil
}

func resolutionLine(a protocol.Approval, r protocol.Resolution) string {
	// The rule is made of the agent's command or path, and the message may quote it: this
	// line is printed to a terminal (and under the watch view's next question).
	line := fmt.Sprintf("%s: %s", Visible(a.ID), Visible(r.Answer))
	if r.Rule != "" {
		rules := r.Rules
		if len(rules) == 0 {
			rules = []string{r.Rule}
		}
		shown := make([]string, len(rules))
		for i, rule := range rules {
			shown[i] = Visible(rule)
		}
		line += fmt.Sprintf(", remembered %s in %s", strings.Join(shown, ", "), Visible(r.Remember))
	}
	if r.Message != "" {
		line += " — " + Visible(r.Message)
	}
	if r.By != "" {
		line += " (by " + Visible(r.By) + ")"
	}
	return line
}

// sessionLabel names the asking session, and the queue's when the ask bubbled up.
func sessionLabel(a protocol.Approval) string {
	if a.ParentSession != "" {
		return a.Session + " → " + a.ParentSession
	}
	return a.Session
}

func until(t time.Time) string {
	d := time.Until(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

func inputSummary(a protocol.Approval) string { return InputSummary(a.Tool, a.Input) }

// InputSummary is the part of a call a person recognises: the command, the file, the URL or
// the pattern with where it searches (a search is approved for its place as much as for its
// pattern), or else the input as it is.
func InputSummary(_ string, input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) == nil {
		for _, k := range []string{"command", "file_path", "notebook_path", "url", "pattern"} {
			if s, ok := m[k].(string); ok && s != "" {
				if p, ok := m["path"].(string); ok && k == "pattern" && p != "" {
					return s + " in " + p
				}
				return s
			}
		}
	}
	return string(input)
}

// Clip cuts s to about n runes on one line for a listing, shown as Shown shows it, and says
// how much it cut: "git status ⟨600 blanks⟩; curl …⟨+40 chars⟩", never a bare "git status …"
// that a padded command would show. Whoever answers for a call reads it whole (Shown).
func Clip(s string, n int) string {
	s = Shown(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + fmt.Sprintf("…⟨+%d chars⟩", len(r)-(n-1))
}

// Shown is s as a person must read it before answering for it: whole, on one line as Visible
// shows it, with each run of more than three blanks (spaces, tabs, and the other characters
// a terminal draws as empty cells: U+3000, U+00A0, U+2800…) shown as its length, so padding
// cannot push what follows out of sight.
func Shown(s string) string { return shownRuns(s, 3) }

// shownRuns is Shown with runs of more than most blanks shown as their length.
func shownRuns(s string, most int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j, n := i, 0
		for j < len(s) {
			r, size := utf8.DecodeRuneInString(s[j:])
			if !blank(r) {
				break
			}
			j += size
			n++
		}
		if n > most {
			fmt.Fprintf(&b, " ⟨%d blanks⟩ ", n)
			i = j
			continue
		}
		if j > i {
			b.WriteString(Visible(s[i:j]))
			i = j
			continue
		}
		for j < len(s) {
			r, size := utf8.DecodeRuneInString(s[j:])
			if blank(r) {
				break
			}
			j += size
		}
		b.WriteString(Visible(s[i:j]))
		i = j
	}
	return b.String()
}

// ShownLines is multi-line text (what an approval writes, a diff) as a person must read it
// before answering for it: each line as Visible shows it, but a run of more than 32 blanks
// (more than code indents by) as its length, and a run of more than three lines that show
// nothing (a diff's +, - or space before them aside) as their count, so padding cannot push
// what follows off the screen.
func ShownLines(s string) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	empty := func(l string) bool {
		if l != "" && strings.ContainsRune("+- ", rune(l[0])) {
			l = l[1:]
		}
		return strings.TrimFunc(l, blank) == ""
	}
	for i := 0; i < len(lines); {
		j := i
		for j < len(lines) && empty(lines[j]) {
			j++
		}
		if j-i > 3 {
			out = append(out, fmt.Sprintf("⟨%d lines that show nothing⟩", j-i))
			i = j
			continue
		}
		if j == i {
			j++
		}
		for ; i < j; i++ {
			l := []rune(shownRuns(lines[i], 32))
			if len(l) > maxShownLine {
				// Blanks broken up by dots pass the runs' collapsing, and wrap into screens.
				l = append(l[:maxShownLine:maxShownLine], []rune(fmt.Sprintf("⟨+%d chars of this line not shown: answer no unless you know them⟩", len(l)-maxShownLine))...)
			}
			out = append(out, string(l))
		}
	}
	return strings.Join(out, "\n")
}

// maxShownLine is the most of one line ShownLines shows.
const maxShownLine = 512

// blank reports a character drawn as an empty cell (a tab as several).
func blank(r rune) bool {
	return r == ' ' || r == '\t' || unicode.Is(unicode.Zs, r) || blankGlyph(r)
}

// watchApprovals follows the approvals stream. On a terminal (stdin and stdout) it is a live
// view with keys; otherwise it prints one line per event (NDJSON with jsonOut).
func watchApprovals(e *Env, jsonOut bool) error {
	in, inOK := e.Stdin.(*os.File)
	out, outOK := e.Stdout.(*os.File)
	if !inOK || !outOK || !isTerminal(in) || !isTerminal(out) || jsonOut {
		return followApprovals(e, jsonOut)
	}
	return watchTerminal(e, in, out)
}

// followApprovals prints one line per event, reconnecting when the daemon cuts the stream
// off (a reader that fell behind), until ctx ends.
func followApprovals(e *Env, jsonOut bool) error {
	enc := json.NewEncoder(e.Stdout)
	enc.SetEscapeHTML(false)
	for {
		err := e.Client().StreamApprovals(e.Ctx, func(ev protocol.ApprovalEvent) error {
			if jsonOut {
				return enc.Encode(ev)
			}
			_, err := fmt.Fprintln(e.Stdout, eventLine(ev))
			return err
		})
		if err != nil || e.Ctx.Err() != nil {
			return err
		}
		select {
		case <-e.Ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func eventLine(ev protocol.ApprovalEvent) string {
	a := ev.Approval
	if ev.Resolution != nil {
		return fmt.Sprintf("%s %s", ev.Type, resolutionLine(a, *ev.Resolution))
	}
	// The reason quotes the command or the path it asks about ("rm of a critical path: …").
	return fmt.Sprintf("%s %s %s session %s: %s — %s", Visible(ev.Type), Visible(a.ID), Visible(a.Tool), Visible(sessionLabel(a)), Clip(inputSummary(a), 100), Clip(a.Reason, 200))
}

// watchTerminal is the live view: the pending approvals, the selected one's preview, and
// keys to answer it.
func watchTerminal(e *Env, in, out *os.File) error {
	restore, err := rawMode(in)
	if err != nil {
		return err
	}
	defer restore()
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()

	type streamMsg struct {
		ev    *protocol.ApprovalEvent
		reset bool
		err   error
	}
	events := make(chan streamMsg)
	send := func(m streamMsg) bool {
		select {
		case events <- m:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		for ctx.Err() == nil {
			// A new stream starts with everything pending: the view starts over with it.
			if !send(streamMsg{reset: true}) {
				return
			}
			err := e.Client().StreamApprovals(ctx, func(ev protocol.ApprovalEvent) error {
				if !send(streamMsg{ev: &ev}) {
					return ctx.Err()
				}
				return nil
			})
			if err != nil && ctx.Err() == nil && !send(streamMsg{err: err}) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	keys := make(chan byte)
	go func() {
		// Left blocked in read when the view ends; the process exits soon after.
		b := make([]byte, 1)
		for {
			if n, err := in.Read(b); err != nil || n == 0 {
				close(keys)
				return
			}
			select {
			case keys <- b[0]:
			case <-ctx.Done():
				return
			}
		}
	}()

	var list watchList
	status := "connecting…"
	draw := func() {
		var b strings.Builder
		b.WriteString("\x1b[H\x1b[2J")
		pending, sel := list.items, list.sel
		fmt.Fprintf(&b, "sandboxd approvals (%d pending)   y allow once · n deny · a allow and remember in session · j/k select · q quit\n\n", len(pending))
		for i, a := range pending {
			mark := "  "
			if i == sel {
				mark = "> "
			}
			fmt.Fprintf(&b, "%s%s  %-9s %s  (expires in %s)\n", mark, a.ID, Visible(a.Tool), Clip(inputSummary(a), 80), until(a.Expires))
		}
		if sel < len(pending) {
			a := pending[sel]
			// The selected call whole: y runs all of it, not the line above.
			fmt.Fprintf(&b, "\ninput:   %s\nsession: %s\nreason:  %s\n", Shown(inputSummary(a)), Visible(sessionLabel(a)), Shown(a.Reason))
			if len(a.SuggestedRules) > 0 {
				fmt.Fprintf(&b, "'a' adds: %s\n", Visible(strings.Join(a.SuggestedRules, ", ")))
			}
			if d := Changes(a.Tool, a.Input, a.AllPreviews()); d != "" {
				lines := strings.Split(strings.TrimRight(d, "\n"), "\n")
				if len(lines) > 30 {
					lines = append(lines[:30], fmt.Sprintf("… %d more lines not shown here (sbctl approvals --json shows them all): answer no unless you have read them", len(lines)-30))
				}
				fmt.Fprintf(&b, "\n%s\n", strings.Join(lines, "\n"))
			}
		}
		fmt.Fprintf(&b, "\n%s\n", status)
		io.WriteString(out, b.String())
	}
	draw()
	tick := time.NewTicker(time.Second) // the expiry countdowns
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			fmt.Fprint(out, "\n")
			return nil
		case m := <-events:
			switch {
			case m.reset:
				list.reset(time.Now())
				status = "watching"
			case m.err != nil:
				status = "stream: " + m.err.Error() + " (reconnecting)"
			case m.ev.Type == "created":
				list.add(m.ev.Approval, time.Now())
			default:
				list.remove(m.ev.Approval.ID, time.Now())
				if m.ev.Resolution != nil {
					status = eventLine(*m.ev)
				}
			}
		case k, ok := <-keys:
			if !ok || k == 'q' || k == 3 || k == 4 {
				fmt.Fprint(out, "\n")
				return nil
			}
			switch k {
			case 'j':
				list.move(1)
			case 'k':
				list.move(-1)
			case 'y', 'n', 'a':
				a, ok := list.selected(time.Now())
				if !ok {
					if len(list.items) > 0 {
						status = "the selected approval changed under you; read it, then answer again"
					}
					break
				}
				ans := protocol.ApprovalAnswer{Answer: protocol.Allow}
				switch k {
				case 'n':
					ans.Answer = protocol.Deny
				case 'a':
					ans.Remember = "session"
				}
				// The answered event removes it from the list.
				if res, err := e.Client().AnswerApproval(ctx, a.ID, ans); err != nil {
					status = "answer: " + err.Error()
				} else {
					status = resolutionLine(res.Approval, res.Resolution)
				}
			}
		}
		draw()
	}
}

// watchSettle is how long an approval the selection moved onto by itself is left on screen
// before a key answers it: longer than it takes to press a key meant for the one before.
const watchSettle = 1500 * time.Millisecond

// watchList is the watch view's pending approvals and which one is selected. The selection
// follows its approval, not its row: when an approval above it leaves (answered elsewhere,
// expired), the rows shift and the selection stays on the one the person is reading. When the
// selected one itself leaves, or the list is rebuilt, the selection lands on another approval
// that the person has not read (so does the first approval of an empty list): a key pressed for the one that left would answer it, and an
// agent can time its own asks to expire under a waiting keystroke. Such a selection answers
// nothing until it has been on screen for watchSettle or the person moves to it.
type watchList struct {
	items []protocol.Approval
	sel   int
	// moved is when the selection last landed somewhere by itself; zero once the person chose.
	moved time.Time
}

func (w *watchList) reset(now time.Time) { w.items, w.sel, w.moved = nil, 0, now }

// add puts a at the end; on an empty list the selection lands on it by itself.
func (w *watchList) add(a protocol.Approval, now time.Time) {
	if len(w.items) == 0 {
		w.moved = now
	}
	w.items = append(w.items, a)
}

func (w *watchList) remove(id string, now time.Time) {
	for i, a := range w.items {
		if a.ID != id {
			continue
		}
		w.items = append(w.items[:i], w.items[i+1:]...)
		switch {
		case i < w.sel:
			w.sel--
		case i == w.sel:
			w.moved = now
		}
		break
	}
	if w.sel >= len(w.items) && w.sel > 0 {
		w.sel = len(w.items) - 1
	}
}

// move is the person's j or k.
func (w *watchList) move(d int) {
	if n := w.sel + d; n >= 0 && n < len(w.items) {
		w.sel = n
	}
	w.moved = time.Time{}
}

// selected is the approval a key answers now: none when the list is empty or the selection
// has not settled.
func (w *watchList) selected(now time.Time) (protocol.Approval, bool) {
	if w.sel >= len(w.items) || (!w.moved.IsZero() && now.Sub(w.moved) < watchSettle) {
		return protocol.Approval{}, false
	}
	return w.items[w.sel], true
}

// rawMode turns off the terminal's line buffering and echo (keys arrive one by one) and
// returns what restores it. Signals stay on (Ctrl-C still interrupts), and so does output
// processing (a "\n" still starts its line at the left).
func rawMode(f *os.File) (func(), error) {
	var old syscall.Termios
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&old))); errno != 0 {
		return nil, fmt.Errorf("read terminal mode: %w", errno)
	}
	raw := old
	raw.Lflag &^= syscall.ICANON | syscall.ECHO
	raw.Cc[syscall.VMIN], raw.Cc[syscall.VTIME] = 1, 0
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCSETS, uintptr(unsafe.Pointer(&raw))); errno != 0 {
		return nil, fmt.Errorf("set terminal mode: %w", errno)
	}
	return func() {
		_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCSETS, uintptr(unsafe.Pointer(&old)))
	}, nil
}

// waitAnswer is --wait on a terminal: the call came back at once as an ask with an approval;
// it resumes that call waiting up to d while it asks here, inline, as agent CLIs do. Whoever
// answers first wins: this prompt, or `sbctl approve|deny` and `sbctl approvals --watch` in
// another terminal (the resumed call returns then, and the prompt goes away).
func waitAnswer(e *Env, in *os.File, sessionID string, res *protocol.CallResult, d time.Duration) (*protocol.CallResult, error) {
	ctx, cancel := context.WithCancel(e.Ctx)
	defer cancel()
	id := res.ApprovalID
	type resumed struct {
		res *protocol.CallResult
		err error
	}
	done := make(chan resumed, 1)
	go func() {
		r, err := e.Client().Call(ctx, sessionID, protocol.CallRequest{ApprovalID: id, WaitMS: d.Milliseconds()})
		done <- resumed{r, err}
	}()
	var a *protocol.Approval
	if list, err := e.Client().Approvals(ctx); err == nil {
		for i := range list {
			if list[i].ID == id {
				a = &list[i]
			}
		}
	}
	reason := ""
	if res.Decision != nil {
		reason = res.Decision.Reason
	}
	fmt.Fprintf(e.Stderr, "sandboxd asks (%s, waiting up to %s): %s\n", id, d, Visible(reason))
	if a != nil {
		fmt.Fprintf(e.Stderr, "  %s %s\n", Visible(a.Tool), Shown(inputSummary(*a)))
		fmt.Fprint(e.Stderr, Changes(a.Tool, a.Input, a.AllPreviews()))
	}
	always := "always (remember in this session)"
	if a != nil && len(a.SuggestedRules) > 0 {
		always = "always (" + Visible(strings.Join(a.SuggestedRules, ", ")) + " in this session)"
	}
	lines := make(chan string)
	go func() {
		// Left blocked in read when another process answers; the process exits soon after.
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case lines <- strings.TrimSpace(strings.ToLower(sc.Text())):
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		fmt.Fprintf(e.Stderr, "allow? [y]es once / [n]o / [a]%s: ", always[1:])
		select {
		case r := <-done:
			fmt.Fprintln(e.Stderr)
			return r.res, r.err
		case l := <-lines:
			var ans protocol.ApprovalAnswer
			switch l {
			case "y", "yes":
				ans.Answer = protocol.Allow
			case "n", "no":
				ans.Answer = protocol.Deny
			case "a", "always":
				ans.Answer, ans.Remember = protocol.Allow, "session"
			default:
				continue
			}
			if _, err := e.Client().AnswerApproval(ctx, id, ans); err != nil {
				var ae *client.APIError
				if !errors.As(err, &ae) || ae.Status != 409 {
					fmt.Fprintf(e.Stderr, "sbctl: answer: %v\n", err)
				}
			}
			r := <-done
			return r.res, r.err
		}
	}
}

// Changes is what approving a call of tool with input writes, to show whoever answers: the
// daemon's diffs (pvs) when it made them, else, for a call that writes (the daemon makes none
// past 4 MiB, or past the approval queue's room), what the input writes, from the input
// itself: a path alone says nothing of the content.
func Changes(tool string, input json.RawMessage, pvs []protocol.Preview) string {
	if len(pvs) > 0 {
		return previewDiffs(pvs)
	}
	var in struct {
		Content    *string `json:"content"`
		OldString  *string `json:"old_string"`
		NewString  *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
		NewSource  *string `json:"new_source"`
		Edits      []struct {
			OldString  string `json:"old_string"`
			NewString  string `json:"new_string"`
			ReplaceAll bool   `json:"replace_all"`
		} `json:"edits"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	var b strings.Builder
	edit := func(old, new string, all bool) {
		what := "replaces"
		if all {
			what = "replaces every"
		}
		fmt.Fprintf(&b, "--- it %s:\n%s\n--- with:\n%s\n", what, shownText(old), shownText(new))
	}
	switch {
	case in.Content != nil:
		fmt.Fprintf(&b, "--- it writes (%d bytes; no diff was made):\n%s\n", len(*in.Content), shownText(*in.Content))
	case in.NewSource != nil:
		fmt.Fprintf(&b, "--- the cell's new source (no diff was made):\n%s\n", shownText(*in.NewSource))
	case in.OldString != nil && in.NewString != nil:
		b.WriteString("(no diff was made)\n")
		edit(*in.OldString, *in.NewString, in.ReplaceAll)
	case len(in.Edits) > 0:
		b.WriteString("(no diff was made)\n")
		for _, e := range in.Edits {
			edit(e.OldString, e.NewString, e.ReplaceAll)
		}
	default:
		return ""
	}
	return ShownLines(b.String())
}

// maxShownText is how much of a text Changes shows; the rest is counted, and whoever answers
// is told to refuse what they have not seen.
const maxShownText = 64 << 10

func shownText(s string) string {
	if len(s) <= maxShownText {
		return s
	}
	cut := s[:maxShownText]
	for len(cut) > 0 && !utf8.ValidString(cut) {
		cut = cut[:len(cut)-1]
	}
	return cut + fmt.Sprintf("\n⟨%d more bytes not shown: answer no unless you know what they hold⟩", len(s)-len(cut))
}

func previewDiffs(pvs []protocol.Preview) string {
	var b strings.Builder
	for _, pv := range pvs {
		if pv.Resolved != "" && pv.Resolved != pv.Path {
			// The diff names the path as the call did; a link on the way takes it elsewhere.
			fmt.Fprintf(&b, "# %s leads to %s (through a symlink): approving writes there\n", pv.Path, pv.Resolved)
		}
		b.WriteString(pv.Diff)
		if pv.Diff != "" && !strings.HasSuffix(pv.Diff, "\n") {
			b.WriteString("\n")
		}
	}
	return ShownLines(b.String())
}
