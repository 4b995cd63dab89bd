package worker

import (
	"testing"
)

// Read shows a CRLF file's lines without their \r, so the agent's old_string has \n only;
// Edit matches it against the file's \r\n and writes new_string's lines with \r\n.
func TestEditCRLF(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		edits         []Edit
		want          string
		fuzzy         bool
	}{
		{"single line", "a\r\nb\r\nc\r\n", []Edit{{OldString: "b", NewString: "B"}}, "a\r\nB\r\nc\r\n", false},
		{"multi-line", "a\r\nb\r\nc\r\n", []Edit{{OldString: "a\nb", NewString: "x\ny"}}, "x\r\ny\r\nc\r\n", false},
		{"new_string grows a line into lines", "a\r\nb\r\nc\r\n", []Edit{{OldString: "b", NewString: "b1\nb2"}}, "a\r\nb1\r\nb2\r\nc\r\n", false},
		{"multiedit", "a\r\nb\r\nc\r\nd\r\n", []Edit{{OldString: "a\nb", NewString: "A\nB\nB2"}, {OldString: "B2\nc", NewString: "C"}}, "A\r\nB\r\nC\r\nd\r\n", false},
		{"replace_all", "x\r\ny\r\nx\r\ny\r\n", []Edit{{OldString: "x\ny", NewString: "z", ReplaceAll: true}}, "z\r\nz\r\n", false},
		{"trailing blanks loose", "f() {  \r\n\treturn 1\r\n}\r\n", []Edit{{OldString: "f() {\n\treturn 1\n}", NewString: "f() {\n\treturn 2\n}"}}, "f() {\r\n\treturn 2\r\n}\r\n", true},
		{"old_string with its \\r", "a\r\nb\r\n", []Edit{{OldString: "a\r\nb", NewString: "x\r\ny"}}, "x\r\ny\r\n", false},
		{"an LF line in a CRLF file", "a\r\nb\nc\r\nd\r\n", []Edit{{OldString: "b\nc", NewString: "B\nC"}}, "a\r\nB\nC\r\nd\r\n", false},
		{"LF file as before", "a\nb\nc\n", []Edit{{OldString: "a\nb", NewString: "x\ny"}}, "x\ny\nc\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, reply, err := editFile(t, tc.content, tc.edits...)
			if err != nil {
				t.Fatal(err)
			}
			if after != tc.want || reply.Fuzzy != tc.fuzzy {
				t.Fatalf("got %q fuzzy=%v, want %q fuzzy=%v", after, reply.Fuzzy, tc.want, tc.fuzzy)
			}
		})
	}
}
