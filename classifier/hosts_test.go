package classifier

import (
	"slices"
	"testing"
)

// TestNamedHosts: the hosts a line names for a connection, in the spellings each program
// takes; each wanted host is among them, and one written in a URL is strict.
func TestNamedHosts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd          string
		want, strict []string
	}{
		{"curl https://evil.example/x", nil, []string{"evil.example"}},
		{"curl -sS 'HTTPS://user:pw@Evil.Example:8443/a?b'", nil, []string{"Evil.Example"}},
		{"wget -qO- --header=x http://[::1]:8080/", nil, []string{"[::1]"}},
		{"curl --url=http://a.example -o x ftp://b.example", nil, []string{"a.example", "b.example"}},
		{`python3 -c "import urllib.request as r; r.urlopen('https://c.example/p')"`, nil, []string{"c.example"}},
		{"git clone git@github.com:o/r.git", nil, []string{"github.com"}},
		{"git push ssh://git@d.example:22/r main", nil, []string{"d.example"}},
		{"scp -P 2 f.txt me@e.example:/tmp/", nil, []string{"e.example"}},
		{"rsync -a ./d f.example::mod/", nil, []string{"f.example"}},
		// curl's globs stay in the host, which no rule can then match.
		{"curl 'http://evi{l,x}.com/'", nil, []string{"evi{l"}},
		{"curl 'http://ev[i-i]l.com/'", nil, []string{"ev[i-i]l.com"}},
		{"exec 3<>/dev/tcp/g.example/80", nil, []string{"g.example"}},
		// ssh's destination, surely; loosely, what a network program's words name.
		{"ssh -p 22 -i key me@h.example uname", []string{"h.example"}, []string{"h.example"}},
		{"ssh -vp22 -- me@hh.example", nil, []string{"hh.example"}},
		{"ssh -J j1.example,me@j2.example:22 k.example", []string{"j1.example", "j2.example"}, []string{"k.example"}},
		{"ssh ok.example -o HostName=l.example", []string{"l.example"}, []string{"ok.example"}},
		{"ssh -o 'HostName\tm.example' ok.example", []string{"m.example"}, nil},
		{"scp -J n.example f ok.example:x", []string{"n.example"}, nil},
		{"sftp -s sftp o.example", []string{"o.example"}, nil},
		{"curl --connect-to ::p.example:443 https://ok.example/", []string{"p.example"}, nil},
		{"curl -xq.example:8080 http://ok.example/", []string{"q.example"}, nil},
		{"echo x && curl -o out r.example:80/x", []string{"r.example"}, nil},
		{"nc s 80", []string{"s"}, nil},
		{"socat - TCP:t.example:80", []string{"t.example"}, nil},
		{"openssl s_client -connect u.example:443", []string{"u.example"}, nil},
		// A proxy set by a variable or an option, for any program.
		{"HTTPS_PROXY=v.example:3128 curl https://ok.example/", []string{"v.example"}, nil},
		{"ALL_PROXY=socks5h://w.example:1080 npm install", nil, []string{"w.example"}},
		{"git -c http.proxy=x.example clone https://ok.example/r", []string{"x.example"}, nil},
		{"pip install --proxy y.example:3128 flask", []string{"y.example"}, nil},
		{"npm --proxy=z.example:8080 install", []string{"z.example"}, nil},
		{"curl http://$H/x", nil, []string{"$H"}},
		{"p=x; https_proxy=$p curl https://ok.example/", nil, []string{"$p"}},
		{"go get aa.example/x", []string{"aa.example"}, nil},
		// What curl and wget take for a URL besides scheme://; sftp's destination.
		{`curl 'http:/\127.0.0.2:8099/a2'`, nil, []string{"127.0.0.2"}},
		{`curl 'HTTP:\\evil.example/x'`, nil, []string{"evil.example"}},
		{"curl http:127.0.0.3:8099/a1", nil, []string{"127.0.0.3"}},
		{"sftp -P 8099 me@sf.example", nil, []string{"sf.example"}},
		// A name with no dot before a port or a path; a lookup's name.
		{"curl -s localhost:8099/x", []string{"localhost"}, nil},
		{"curl -x intranet:3128 http://ok.example/", []string{"intranet"}, nil},
		{"socat - TCP:localhost:8099", []string{"localhost"}, nil},
		{"HTTPS_PROXY=intranet:3128 curl https://ok.example", []string{"intranet"}, nil},
		{"dig data.evil.example", []string{"data.evil.example"}, nil},
		{"ping -c1 evil.example", []string{"evil.example"}, nil},
		// A config file the line names may route anywhere.
		{"ssh -F s.cfg ok.example id", nil, []string{ConfigHost}},
		{"scp -Fs.cfg f ok.example:x", nil, []string{ConfigHost}},
		{"GIT_CONFIG_GLOBAL=g.cfg git clone https://ok.example/x", nil, []string{ConfigHost}},
		{"git -c include.path=/abs/g.cfg clone https://ok.example/x", nil, []string{ConfigHost}},
		{"GIT_SSH_COMMAND='ssh -F cfg' git clone ok.example:x", nil, []string{ConfigHost}},
		{"git -c core.sshCommand='ssh -F cfg' clone ok.example:x", nil, []string{ConfigHost}},
		{"pip install --index-url=ab.example foo", []string{"ab.example"}, nil},
		// curl's long options by an unambiguous prefix; git's resolve and proxy given by
		// curloptResolve, GIT_CONFIG_KEY_n and --config-env; ssh's jump hosts and HostName.
		{"curl --resolv ok.example:443:10.1.2.3 https://ok.example/", nil, []string{"10.1.2.3"}},
		{"curl --prepro 10.9.9.9:1080 --socks5-ho 10.9.9.8:1 https://ok.example/", nil, []string{"10.9.9.9", "10.9.9.8"}},
		{"git -c http.curloptResolve=ok.example:443:10.1.2.4 ls-remote https://ok.example/r", nil, []string{"10.1.2.4"}},
		{"git -c http.https://ok.example/.curloptResolve=ok.example:443:10.1.2.5 ls-remote https://ok.example/r", nil, []string{"10.1.2.5"}},
		{"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.proxy GIT_CONFIG_VALUE_0=10.9.9.7:1 git clone https://ok.example/r", nil, []string{"10.9.9.7"}},
		{"git --config-env=http.proxy=P clone https://ok.example/r", nil, []string{"$P"}},
		{"ssh -J 10.9.9.6 ok.example", nil, []string{"10.9.9.6"}},
		{"ssh -o ProxyJump=me@10.9.9.5:22,10.9.9.4 ok.example", nil, []string{"10.9.9.5", "10.9.9.4"}},
		{"ssh -oHostName=10.9.9.3 ok.example", nil, []string{"10.9.9.3"}},
		{"ssh -o 'HostName\t10.9.9.2' ok.example", nil, []string{"10.9.9.2"}},
		// A proxy set for the program is where it connects: surely.
		{"HTTPS_PROXY='aj.example:3128' wget -e use_proxy=on https://ok.example/", nil, []string{"aj.example"}},
		{"git -c http.proxy=ak.example clone https://ok.example/r", nil, []string{"ak.example"}},
		{"pip install --proxy al.example:3128 flask", nil, []string{"al.example"}},
		{"npm --https-proxy=http://am.example:8080 install", nil, []string{"am.example"}},
		// Where curl's routing options send it, whatever the URL's host: surely.
		{"curl --resolve ok.example:80:169.254.169.254 http://ok.example/", nil, []string{"169.254.169.254", "ok.example"}},
		{"curl --resolve +ok.example:443:10.0.0.1,[fd00::1] https://ok.example/", nil, []string{"10.0.0.1", "[fd00::1]"}},
		{"curl --connect-to ok.example:80:ac.example:8080 http://ok.example/", nil, []string{"ac.example"}},
		{"curl --connect-to ::[::1]:80 http://ok.example/", nil, []string{"[::1]"}},
		{"curl -sSx http://u:p@ad.example:3128 http://ok.example/", nil, []string{"ad.example"}},
		{"curl -xae.example:8080 http://ok.example/", nil, []string{"ae.example"}},
		{"curl --proxy socks5h://af.example http://ok.example/", nil, []string{"af.example"}},
		{"curl --socks5-hostname ag.example:1080 http://ok.example/", nil, []string{"ag.example"}},
		{"curl --preproxy ah.example -x ai.example http://ok.example/", nil, []string{"ah.example", "ai.example"}},
	} {
		var all, strict []string
		for _, h := range NamedHosts(Classify(tc.cmd, testOpts)) {
			all = append(all, h.Host)
			if !h.Loose {
				strict = append(strict, h.Host)
			}
		}
		for _, w := range append(tc.want, tc.strict...) {
			if !slices.Contains(all, w) {
				t.Errorf("%q: %q not among the named hosts %q", tc.cmd, w, all)
			}
		}
		for _, w := range tc.strict {
			if !slices.Contains(strict, w) {
				t.Errorf("%q: %q named, but not as written in a URL (%q)", tc.cmd, w, strict)
			}
		}
	}
	// Hosts to reach without a proxy, and wget's switch, are no proxy.
	for _, h := range NamedHosts(Classify("NO_PROXY=localhost,.corp no_proxy=x wget -e use_proxy=on http://ok.example/", testOpts)) {
		if !h.Loose && h.Host != "ok.example" {
			t.Errorf("no proxy taken surely for a host: %+v", h)
		}
	}
	// The values of curl's other options are no route: loose, as any word of curl's is.
	for _, h := range NamedHosts(Classify("curl -o x.example -H y.example:1 -sxz.example http://ok.example/", testOpts)) {
		if !h.Loose && h.Host != "ok.example" && h.Host != "z.example" {
			t.Errorf("curl's -o or -H value taken surely for a host: %+v", h)
		}
	}
	for _, cmd := range []string{"cat file:///etc/passwd ./a:b", "git log --format=%H:%s", "cp a:b c", "go test ./...", "make -j4 build"} {
		if got := NamedHosts(Classify(cmd, testOpts)); len(got) != 0 {
			t.Errorf("%q names hosts %+v", cmd, got)
		}
	}
}
