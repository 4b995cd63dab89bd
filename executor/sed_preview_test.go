package executor

import (
	"reflect"
	"testing"
)

func TestWithoutInPlace(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		want []string
		ok   bool
	}{
		{"plain", []string{"-i", "s/a/b/", "f"}, []string{"s/a/b/", "f"}, true},
		{"long", []string{"--in-place", "-E", "s/a+/b/", "f"}, []string{"-E", "s/a+/b/", "f"}, true},
		{"after script", []string{"-e", "s/a/b/", "-i", "f"}, []string{"-e", "s/a/b/", "f"}, true},
		{"no -i", []string{"s/a/b/", "f"}, []string{"s/a/b/", "f"}, false},
		{"backup suffix", []string{"-i.bak", "s/a/b/", "f"}, nil, false},
		{"long suffix", []string{"--in-place=.orig", "s/a/b/", "f"}, nil, false},
		{"cluster", []string{"-ni", "s/a/b/p", "f"}, nil, false},
		{"follow symlinks", []string{"-i", "--follow-symlinks", "s/a/b/", "f"}, nil, false},
		{"after --", []string{"-i", "s/a/b/", "--", "-i"}, []string{"s/a/b/", "--", "-i"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := withoutInPlace(tc.args)
			if ok != tc.ok || (ok && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("withoutInPlace(%q) = %q, %v; want %q, %v", tc.args, got, ok, tc.want, tc.ok)
			}
		})
	}
}
