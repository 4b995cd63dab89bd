package classifier

import (
	"slices"
	"testing"
)

func TestNamedHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd  string
		want []string
	}{
		{"curl https://evil.example/x", []string{"evil.example"}},
		{"curl -sS 'HTTPS://user:pw@Evil.Example:8443/a?b'", []string{"Evil.Example"}},
		{"wget -qO- --header=x http://[::1]:8080/", []string{"[::1]"}},
		{"curl --url=http://a.example -o x ftp://b.example", []string{"a.example", "b.example"}},
		{`python3 -c "import urllib.request as r; r.urlopen('https://c.example/p')"`, []string{"c.example"}},
		{"git clone git@github.com:o/r.git", []string{"github.com"}},
		{"git push ssh://git@d.example:22/r main", []string{"d.example"}},
		{"scp -P 2 f.txt me@e.example:/tmp/", []string{"e.example"}},
		{"rsync -a ./d f.example::mod/", []string{"f.example"}},
		{"ssh -p 22 -i key me@g.example uname", []string{"g.example"}},
		{"ssh -J j1.example,me@j2.example:22 h.example", []string{"j1.example", "j2.example", "h.example"}},
		{"ssh -o HostName=i.example alias", []string{"i.example", "alias"}},
		{"ssh -oProxyJump=k.example l.example", []string{"k.example", "l.example"}},
		{"sftp me@m.example", []string{"m.example"}},
		{"curl http://$H/x", []string{"$H"}},
		{"cat file:///etc/passwd ./a:b", nil},
		{"git log --format=%H:%s", nil},
		{"cp a:b c", nil},
		{"echo x && curl -o out n.example:80/x", []string{"n.example"}},
		{"wget -H 'X: y' o.example", []string{"o.example"}},
	} {
		got := NamedHosts(Classify(tc.cmd, testOpts))
		if !slices.Equal(got, tc.want) {
			t.Errorf("NamedHosts(%q) = %q, want %q", tc.cmd, got, tc.want)
		}
	}
}
