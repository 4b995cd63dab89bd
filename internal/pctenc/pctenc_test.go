package pctenc

import "testing"

func TestDecodeLenient(t *testing.T) {
	for _, c := range []struct {
		in   string
		plus bool
		want string
	}{
		{"/a%2Fb", false, "/a/b"}, {"%zz%4", false, "%zz%4"}, {"%41%62", false, "Ab"}, {"a+b", false, "a+b"},
		{"a+b%2B", true, "a b+"}, {"%", true, "%"}, {"%2", false, "%2"}, {"%e2%82%ac", false, "€"},
	} {
		if got := DecodeLenient(c.in, c.plus); got != c.want {
			t.Errorf("DecodeLenient(%q, %v) = %q, want %q", c.in, c.plus, got, c.want)
		}
	}
}
