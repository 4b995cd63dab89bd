package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/protocol"
)

// TestApprovalSedPreview: an approval for `sed -i` carries the diff of the same sed run
// without -i, confined, on the current file; approving writes exactly that content (the
// command is not run again: a file changed since is refused, not re-edited); a shape with no
// preview (a file named twice) still asks and runs as the command. Several files and backup
// suffixes have one preview each, applied all or none.
func TestApprovalSedPreview(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	f := filepath.Join(dir, "a.txt")
	orig := "one\ntwo\nthree\n"
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	sed := callBody("Bash", fmt.Sprintf(`{"command":"sed -i 's/two/TWO/' %s"}`, f), "")
	for _, changed := range []bool{false, true} {
		if err := os.WriteFile(f, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		r := td.callRaw(t, s.ID, sed)
		if r.ApprovalID == "" {
			t.Fatalf("no approval: %+v", r)
		}
		_, b := td.do(t, "GET", "/v1/approvals", "")
		var list protocol.ApprovalList
		decodeInto(t, b, &list)
		if len(list.Approvals) != 1 || list.Approvals[0].Preview == nil || list.Approvals[0].Preview.Path != f ||
			!strings.Contains(list.Approvals[0].Preview.Diff, "-two\n+TWO\n") {
			t.Fatalf("preview: %s", b)
		}
		if got, _ := os.ReadFile(f); string(got) != orig {
			t.Fatalf("the preview changed the file: %q", got)
		}
		if changed {
			if err := os.WriteFile(f, []byte("one\ntwo\nthree\nfour\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != 200 {
			t.Fatalf("answer: %d %s", code, b)
		}
		r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
		got, _ := os.ReadFile(f)
		if !changed {
			if r.IsError || string(got) != "one\nTWO\nthree\n" || r.Data["approved_preview"] != true {
				t.Fatalf("applied: %+v %q", r, got)
			}
			continue
		}
		if !r.IsError || r.Error == nil || r.Error.Class != "stale" || string(got) != "one\ntwo\nthree\nfour\n" {
			t.Fatalf("changed file: %+v %q", r, got)
		}
	}
	// Several files, and a backup suffix: each file and each backup is in the previews, in the
	// order approving writes them, and approving writes exactly those.
	g := filepath.Join(dir, "b.txt")
	ask := func(cmd string) (protocol.CallResult, protocol.Approval) {
		t.Helper()
		for _, p := range []string{f, g} {
			if err := os.WriteFile(p, []byte(orig), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := td.callRaw(t, s.ID, callBody("Bash", fmt.Sprintf(`{"command":%q}`, cmd), ""))
		if r.ApprovalID == "" {
			t.Fatalf("%s: no approval: %+v", cmd, r)
		}
		_, b := td.do(t, "GET", "/v1/approvals", "")
		var list protocol.ApprovalList
		decodeInto(t, b, &list)
		if len(list.Approvals) != 1 {
			t.Fatalf("%s: approvals %s", cmd, b)
		}
		return r, list.Approvals[0]
	}
	paths := func(a protocol.Approval) []string {
		var ps []string
		for _, pv := range a.AllPreviews() {
			ps = append(ps, pv.Path)
		}
		return ps
	}
	r, a := ask(fmt.Sprintf("sed -i.bak 's/two/2/' %s b.txt", f))
	want := []string{f + ".bak", f, g + ".bak", g}
	if fmt.Sprint(paths(a)) != fmt.Sprint(want) || a.Preview == nil || a.Preview.Path != want[0] ||
		!strings.Contains(a.Previews[3].Diff, "-two\n+2\n") || a.Previews[2].Exists {
		t.Fatalf("sed -i.bak on two files: previews %q (want %q): %+v", paths(a), want, a.Previews)
	}
	td.answer(t, r.ApprovalID, `{"answer":"allow"}`)
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if r.IsError || r.Data["approved_preview"] != true {
		t.Fatalf("sed -i.bak on two files approved: %+v", r)
	}
	for p, w := range map[string]string{f: "one\n2\nthree\n", g: "one\n2\nthree\n", f + ".bak": orig, g + ".bak": orig} {
		if got, _ := os.ReadFile(p); string(got) != w {
			t.Errorf("%s after the approved sed -i.bak: %q, want %q", p, got, w)
		}
	}
	// The second file changed after the question: nothing is written, not even the first.
	for _, p := range []string{f + ".bak", g + ".bak"} {
		os.Remove(p)
	}
	r, a = ask(fmt.Sprintf("sed -i -e 's/one/1/' %s %s", f, g))
	if fmt.Sprint(paths(a)) != fmt.Sprint([]string{f, g}) {
		t.Fatalf("sed -i on two files: previews %q", paths(a))
	}
	if err := os.WriteFile(g, []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	td.answer(t, r.ApprovalID, `{"answer":"allow"}`)
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if got, _ := os.ReadFile(f); !r.IsError || r.Error == nil || r.Error.Class != "stale" || string(got) != orig {
		t.Fatalf("second file changed: %+v; first file now %q", r, got)
	}
	// A script that does more than edit is not run for a preview before it is approved: not
	// one that runs a program (e), nor one that reads another file in (r).
	for _, cmd := range []string{fmt.Sprintf("sed -i '1e echo EXECUTED' %s", f), fmt.Sprintf("sed -i 's/two/echo EXECUTED/e' %s", f),
		fmt.Sprintf("sed -i '1r %s' %s", g, f)} {
		r, a = ask(cmd)
		if a.Preview != nil || len(a.AllPreviews()) != 0 {
			t.Fatalf("%s: previewed before approval: %+v", cmd, a.AllPreviews())
		}
		td.answer(t, r.ApprovalID, `{"answer":"deny"}`)
	}
	// A shape with no preview (a file named twice: sed edits it twice) still asks, and
	// approved runs as the command.
	r, a = ask(fmt.Sprintf("sed -i 's/two/2/' %s %s", f, f))
	if a.Preview != nil {
		t.Fatalf("a file named twice has a preview: %+v", a.Preview)
	}
	td.answer(t, r.ApprovalID, `{"answer":"allow"}`)
	r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
	if got, _ := os.ReadFile(f); r.IsError || string(got) != "one\n2\nthree\n" {
		t.Fatalf("a file named twice, approved: %+v %q", r, got)
	}
}

// TestApprovedPreviewGoesWhereDecided: an approved write goes where its decision found the
// path leads, or nowhere. A dir on the way swapped for a symlink while the approval waited
// (notes -> .claude, which the decision never saw) refuses the write rather than following
// it, for Write's preview and for sed -i's.
func TestApprovedPreviewGoesWhereDecided(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	notes, claude := filepath.Join(dir, "notes"), filepath.Join(dir, ".claude")
	swap := func() {
		t.Helper()
		if err := os.RemoveAll(notes); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(".claude", notes); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ name, tool, input string }{
		{"Write", "Write", fmt.Sprintf(`{"file_path":%q,"content":"{\"hooks\":{}}\n"}`, filepath.Join(notes, "settings.json"))},
		{"sed -i", "Bash", fmt.Sprintf(`{"command":"sed -i s/a/b/ %s"}`, filepath.Join(notes, "settings.json"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(notes)
			os.RemoveAll(claude)
			if err := os.Mkdir(notes, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(claude, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.tool == "Bash" {
				for _, d := range []string{notes, claude} {
					if err := os.WriteFile(filepath.Join(d, "settings.json"), []byte("a\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			r := td.callRaw(t, s.ID, callBody(tc.tool, tc.input, ""))
			if r.ApprovalID == "" {
				t.Fatalf("no approval: %+v", r)
			}
			_, b := td.do(t, "GET", "/v1/approvals", "")
			var list protocol.ApprovalList
			decodeInto(t, b, &list)
			if len(list.Approvals) != 1 || list.Approvals[0].Preview == nil || list.Approvals[0].Preview.Resolved != filepath.Join(notes, "settings.json") {
				t.Fatalf("want one preview resolved to notes/settings.json: %s", b)
			}
			swap()
			if code, b := td.answer(t, r.ApprovalID, `{"answer":"allow"}`); code != 200 {
				t.Fatalf("answer: %d %s", code, b)
			}
			r = td.callRaw(t, s.ID, fmt.Sprintf(`{"approval_id":%q}`, r.ApprovalID))
			if !r.IsError {
				t.Errorf("the approved write followed the swapped-in link: %+v", r)
			}
			if got, _ := os.ReadFile(filepath.Join(claude, "settings.json")); strings.Contains(string(got), "hooks") || string(got) == "b\n" {
				t.Errorf(".claude/settings.json was written through the link: %q", got)
			}
		})
	}
}

// TestAskedEditOfAFileChangedSinceRead: an Edit asked in default mode of a file the session
// read, which has changed since (the user's own edit), is refused as stale, as acceptEdits
// refuses it: approved over the new text it would undo the user's change.
func TestAskedEditOfAFileChangedSinceRead(t *testing.T) {
	td := startDaemon(t, "")
	dir := rootDir(t)
	s := td.newSession(t, fmt.Sprintf(`{"cwd":%q,"mode":"default"}`, dir))
	f := filepath.Join(dir, "st.txt")
	if err := os.WriteFile(f, []byte("keep\nold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := td.callRaw(t, s.ID, callBody("Read", fmt.Sprintf(`{"file_path":%q}`, f), "")); r.IsError {
		t.Fatalf("read: %+v", r)
	}
	if err := os.WriteFile(f, []byte("USER CHANGED LINE\nold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		fmt.Sprintf(`{"file_path":%q,"old_string":"old","new_string":"new"}`, f),
	} {
		r := td.callRaw(t, s.ID, callBody("Edit", in, ""))
		if r.ApprovalID != "" || !r.IsError || !strings.Contains(fmt.Sprint(r.Content), "changed on disk") {
			t.Errorf("an Edit of a file changed since the read: %+v", r)
		}
	}
	if got, _ := os.ReadFile(f); string(got) != "USER CHANGED LINE\nold\n" {
		t.Errorf("the user's change was undone: %q", got)
	}
}
