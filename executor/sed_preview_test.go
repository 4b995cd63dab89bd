package executor

import (
	"reflect"
	"testing"
)

func TestSedInPlace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		args        []string
		opts, files []string
		suffix      string
		ok          bool
	}{
		{"plain", []string{"-i", "s/a/b/", "f"}, []string{"s/a/b/"}, []string{"f"}, "", true},
		{"long", []string{"--in-place", "-E", "s/a+/b/", "f"}, []string{"-E", "s/a+/b/"}, []string{"f"}, "", true},
		{"after script", []string{"-e", "s/a/b/", "-i", "f"}, []string{"-e", "s/a/b/"}, []string{"f"}, "", true},
		{"attached script", []string{"-es/a/b/", "-i", "f", "g"}, []string{"-es/a/b/"}, []string{"f", "g"}, "", true},
		{"two files", []string{"-i", "s/a/b/", "f", "g"}, []string{"s/a/b/"}, []string{"f", "g"}, "", true},
		{"files first", []string{"-i", "s/a/b/", "f", "-n", "g"}, []string{"-n", "s/a/b/"}, []string{"f", "g"}, "", true},
		{"no -i", []string{"s/a/b/", "f"}, nil, nil, "", false},
		{"backup suffix", []string{"-i.bak", "s/a/b/", "f"}, []string{"s/a/b/"}, []string{"f"}, ".bak", true},
		{"long suffix", []string{"--in-place=.orig", "s/a/b/", "f"}, []string{"s/a/b/"}, []string{"f"}, ".orig", true},
		{"abbreviated long", []string{"--in=.o", "--expr", "s/a/b/", "f"}, []string{"--expr", "s/a/b/"}, []string{"f"}, ".o", true},
		{"cluster", []string{"-ni", "s/a/b/p", "f"}, []string{"-n", "s/a/b/p"}, []string{"f"}, "", true},
		// GNU sed reads -in as -i with the suffix "n", not as -i -n.
		{"-in is a suffix", []string{"-in", "s/a/b/p", "f"}, []string{"s/a/b/p"}, []string{"f"}, "n", true},
		{"suffix with a star", []string{"-i", "--in-place=bak/*", "s/a/b/", "f"}, nil, nil, "", false},
		{"follow symlinks", []string{"-i", "--follow-symlinks", "s/a/b/", "f"}, nil, nil, "", false},
		{"debug", []string{"-i", "--debug", "s/a/b/", "f"}, nil, nil, "", false},
		{"unknown option", []string{"-i", "-x", "s/a/b/", "f"}, nil, nil, "", false},
		{"no script", []string{"-i"}, nil, nil, "", false},
		{"-e without its value", []string{"-i", "f", "-e"}, nil, nil, "", false},
		{"after --", []string{"-i", "s/a/b/", "--", "-i"}, []string{"s/a/b/"}, []string{"-i"}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, files, suffix, ok := sedInPlace(tc.args)
			if ok != tc.ok || ok && (!reflect.DeepEqual(opts, tc.opts) || !reflect.DeepEqual(files, tc.files) || suffix != tc.suffix) {
				t.Errorf("sedInPlace(%q) = %q, %q, %q, %v; want %q, %q, %q, %v", tc.args, opts, files, suffix, ok, tc.opts, tc.files, tc.suffix, tc.ok)
			}
		})
	}
}

// FuzzSedInPlace: whatever the words, the split keeps every word but -i's in order, and the
// files it names are words of the input.
func FuzzSedInPlace(f *testing.F) {
	f.Add("-i\x00s/a/b/\x00f")
	f.Add("-ni.bak\x00-e\x00p\x00--\x00-f")
	f.Fuzz(func(t *testing.T, joined string) {
		args := splitNUL(joined)
		opts, files, _, ok := sedInPlace(args)
		if !ok {
			return
		}
		in := map[string]bool{}
		for _, a := range args {
			in[a] = true
		}
		for _, f := range files {
			if !in[f] {
				t.Fatalf("file %q is not a word of %q", f, args)
			}
		}
		if len(opts)+len(files) > len(args) {
			t.Fatalf("%q: more words out (%q %q) than in", args, opts, files)
		}
	})
}

func splitNUL(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
