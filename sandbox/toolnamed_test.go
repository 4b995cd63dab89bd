package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestToolConfigNames: each tool config's parser, on the forms the tools read, names the
// programs (and psql's included files) by their absolute paths, and nothing else.
func TestToolConfigNames(t *testing.T) {
	t.Parallel()
	const home = "/home/u"
	for _, tc := range []struct {
		rel, src     string
		want         []string // relative to the home unless absolute
		wantIncludes []string
		wantNotNamed []string
	}{
		{rel: ".npmrc", src: "script-shell=/home/u/proj/tools/npmsh\nnode-options=--require /home/u/proj/tools/pre.js\n",
			want: []string{"proj/tools/npmsh", "proj/tools/pre.js"}},
		{rel: ".npmrc", src: "; c\n# c\nregistry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=x/y\n" +
			"node-options = \"--max-old-space-size=4096 -r ~/p/a.js --require=${HOME}/p/b.js --import $HOME/p/c.mjs -r ./rel.js\"\n" +
			"editor=code --wait --user-data-dir=/home/u/proj\nSCRIPT_SHELL=~/p/sh\ngit = /opt/git/bin/git\ninit-module=~/p/init.js\nshell=relative/sh\n",
			want:         []string{"p/a.js", "p/b.js", "p/c.mjs", "p/sh", "/opt/git/bin/git", "p/init.js"},
			wantNotNamed: []string{"rel.js", "relative/sh", "registry.npmjs.org", "proj"}},
		{rel: ".kube/config", src: `apiVersion: v1
users:
- name: dev
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /home/u/proj/tools/kubecred
      args:
      - get-token
      - --cluster=x
      - ~/p/helper.sh
- name: rel
  user:
    exec:
      command: "./bin/cred"   # relative: the config's dir
      args: ["eks", "/home/u/p/flow.sh"]
- name: path
  user:
    exec:
      command: aws
- name: gcp
  user:
    auth-provider:
      config:
        cmd-path: $HOME/p/gcloud
contexts:
- context:
    cluster: c
  name: c
`, want: []string{"proj/tools/kubecred", "p/helper.sh", ".kube/bin/cred", "p/flow.sh", "p/gcloud"}},
		{rel: ".kube/config", src: `{"users": [{"name": "j", "user": {"exec": {"command": "/home/u/p/jcred", "args": ["/home/u/p/jarg"]}}}]}` + "\n",
			want: []string{"p/jcred", "p/jarg"}},
		{rel: ".cargo/config.toml", src: `[build]
rustc-wrapper = "/home/u/proj/tools/wrap"   # comment
rustc = "tools/rustc"
rustdoc = "rustdoc"

[target.x86_64-unknown-linux-gnu]
linker = '/home/u/p/ld'
runner = "~/p/run --flag"

[target.'cfg(target_os = "linux")']
runner = [
  "/home/u/p/arun",
  "--x",
  "/home/u/p/arg",
]

[registry]
global-credential-providers = ["cargo:token", "/home/u/p/gcp --a"]

[registries.my]
credential-provider = ["./cp/prov", "arg"]

[credential-alias]
mine = "/home/u/p/alias-cred"

[source.vendored]
directory = "vendor"
`, want: []string{"proj/tools/wrap", "tools/rustc", "p/ld", "p/run", "p/arun", "p/arg", "p/gcp", "cp/prov", "p/alias-cred"},
			wantNotNamed: []string{"rustdoc", ".cargo/tools/rustc", "vendor"}},
		{rel: ".cargo/config", src: "build.rustc-wrapper = \"/home/u/p/w2\"\ntarget.x86_64-unknown-linux-gnu.linker = \"/home/u/p/l2\"\npaths = [\"/home/u/p/crate\"]\ncredential-alias.other = [\"/home/u/p/ca2\"]\n",
			want: []string{"p/w2", "p/l2", "p/ca2"}, wantNotNamed: []string{"p/crate"}},
		{rel: ".aws/config", src: "[default]\nregion = us-east-1\n\n[profile dev]\ncredential_process = /home/u/proj/tools/awscred --profile dev\n[profile q]\ncredential_process = \"~/p/q cred\" ~/p/qarg\n",
			want: []string{"proj/tools/awscred", "p/q", "p/qarg"}},
		{rel: ".gnupg/gpg-agent.conf", src: "# c\ndefault-cache-ttl 600\npinentry-program /home/u/proj/tools/pinentry\nscdaemon-program\t~/p/scd\n",
			want: []string{"proj/tools/pinentry", "p/scd"}},
		{rel: ".psqlrc", src: "\\set QUIET 1\n\\pset null '(null)'\n\\! /home/u/proj/tools/hi\n\\setenv PAGER '~/p/pager -S'\n\\setenv PSQL_EDITOR /home/u/p/ed\n" +
			"\\setenv TZ UTC\n\\set PROMPT1 `~/p/prompt`\n\\o |/home/u/p/out\n\\copy t to program '/home/u/p/cp'\n\\i ~/p/more.sql\n\\ir lib/rel.sql\n\\i cwd.sql\n" +
			"SELECT '/home/u/p/sql';\n",
			want:         []string{"proj/tools/hi", "p/pager", "p/ed", "p/prompt", "p/out", "p/cp"},
			wantIncludes: []string{"p/more.sql", "lib/rel.sql"},
			wantNotNamed: []string{"cwd.sql", "p/sql"}},
	} {
		abs := func(ps []string) []string {
			var out []string
			for _, p := range ps {
				if !filepath.IsAbs(p) {
					p = filepath.Join(home, p)
				}
				out = append(out, p)
			}
			return out
		}
		n := toolConfigs[tc.rel]([]byte(tc.src), home, filepath.Dir(filepath.Join(home, tc.rel)))
		for _, w := range abs(tc.want) {
			if !slices.Contains(n.named, w) {
				t.Errorf("%s: %s not among %q", tc.rel, w, n.named)
			}
		}
		for _, w := range abs(tc.wantIncludes) {
			if !slices.Contains(n.includes, w) {
				t.Errorf("%s: include %s not among %q", tc.rel, w, n.includes)
			}
		}
		for _, w := range abs(tc.wantNotNamed) {
			if slices.Contains(n.named, w) || slices.Contains(n.includes, w) {
				t.Errorf("%s: %s named: %q %q", tc.rel, w, n.named, n.includes)
			}
		}
		for _, p := range slices.Concat(n.named, n.includes) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == home || p == "/" || strings.HasPrefix(p, home+"/registry") {
				t.Errorf("%s: %q named", tc.rel, p)
			}
		}
	}
}

// TestToolConfigNamedPaths: on a home, what each config names, and what a file psql's \i
// reads names, are among the paths; an oversized config fails the whole.
func TestToolConfigNamedPaths(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".npmrc"):                   "script-shell=~/proj/tools/npmsh\nnode-options=--require ~/proj/tools/pre.js\nglobalconfig=~/dot/npmrc\n",
		filepath.Join(home, "dot", "npmrc"):             "git=~/proj/tools/npmgit\n",
		filepath.Join(home, ".kube", "config"):          "users:\n- name: u\n  user:\n    exec:\n      command: ~/proj/tools/kubecred\n",
		filepath.Join(home, ".cargo", "config.toml"):    "[build]\nrustc-wrapper = \"proj/tools/wrap\"\n",
		filepath.Join(home, ".cargo", "config"):         "[target.x]\nlinker = \"/opt/ld\"\n",
		filepath.Join(home, ".aws", "config"):           "[default]\ncredential_process = ~/proj/tools/awscred\n",
		filepath.Join(home, ".gnupg", "gpg-agent.conf"): "pinentry-program ~/proj/tools/pinentry\n",
		filepath.Join(home, ".psqlrc"):                  "\\ir dot/psql.sql\n",
		filepath.Join(home, ".config", "go", "env"):     "GOFLAGS=-mod=mod -toolexec=$HOME/proj/tools/toolexec\nCC=~/proj/tools/cc -O2\nGOPROXY=https://x/y\n",
		filepath.Join(home, ".docker", "config.json"):   `{"auths": {}, "cliPluginsExtraDirs": ["~/proj/dockerplugins", "/opt/dp"]}`,
		filepath.Join(home, ".terraformrc"):             "plugin_cache_dir = \"$HOME/proj/tfcache\"\nprovider_installation {\n  dev_overrides {\n    \"h/x\" = \"/home/u/../../opt/tfdev\"\n  }\n}\n",
		filepath.Join(home, ".wgetrc"):                  "use_askpass = ~/proj/tools/askpass\n",
		filepath.Join(home, ".gnupg", "gpg.conf"):       "agent-program ~/proj/tools/agent --x\n",
		filepath.Join(home, ".inputrc"):                 "set editing-mode vi\n$include ~/dot/inputrc\n",
		filepath.Join(home, "dot", "inputrc"):           "$include ~/proj/inputrc.more\n",
		filepath.Join(home, ".lesskey"):                 "#env\nLESSOPEN=|~/proj/tools/lessfilter %s\n",
		filepath.Join(home, ".manpath"):                 "MANPATH_MAP /bin /usr/share/man\nDEFINE pager ~/proj/tools/manpager -s\n",
		filepath.Join(home, ".sqliterc"):                ".headers on\n.load ~/proj/ext.so\n.read ~/dot/sql.more\n",
		filepath.Join(home, "dot", "sql.more"):          ".shell ~/proj/tools/fromsqlite\n",
		filepath.Join(home, ".perldb"):                  "require '/opt/perldb/x.pl';\n",
		filepath.Join(home, "dot", "psql.sql"):          "\\! ~/proj/tools/fromsql\n",
	})
	got, err := toolConfigNamedPaths(home, uint32(os.Getuid()), nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAmong(t, home, got, "proj/tools/npmsh", "proj/tools/pre.js", "proj/tools/kubecred", "proj/tools/wrap", "proj/tools/awscred",
		"proj/tools/pinentry", "dot/psql.sql", "proj/tools/fromsql", "proj/tools/toolexec", "proj/tools/cc",
		"proj/dockerplugins", "/opt/dp", "proj/tfcache", "/opt/tfdev", "proj/tools/askpass", "/opt/ld",
		"dot/npmrc", "proj/tools/npmgit", "proj/tools/agent", "dot/inputrc", "proj/inputrc.more", "proj/tools/lessfilter",
		"proj/tools/manpager", "proj/ext.so", "dot/sql.more", "proj/tools/fromsqlite", "/opt/perldb/x.pl")
	// missing answers for a file without a look.
	if got, err := toolConfigNamedPaths(home, uint32(os.Getuid()), func(p string) bool { return p == filepath.Join(home, ".npmrc") }); err != nil || slices.Contains(got, filepath.Join(home, "proj/tools/npmsh")) {
		t.Errorf("a config missing says is not there was read: %v (%v)", got, err)
	}
	if err := os.WriteFile(filepath.Join(home, ".psqlrc"), []byte(strings.Repeat("-- x\n", maxShellFileBytes/5+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := toolConfigNamedPaths(home, uint32(os.Getuid()), nil); !errors.Is(err, errToolConfigTooLarge) {
		t.Errorf("an oversized config: %v", err)
	}
}

// TestToolConfigTooManyFiles: psql files that include more files than are read fail the whole.
func TestToolConfigTooManyFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	files := map[string]string{filepath.Join(home, ".psqlrc"): "\\i ~/p/0.sql\n"}
	for i := range maxToolConfigFiles + 1 {
		files[filepath.Join(home, "p", strings.Repeat("x", i)+"0.sql")] = "\\i ~/p/" + strings.Repeat("x", i+1) + "0.sql\n"
	}
	writeFiles(t, files)
	if _, err := toolConfigNamedPaths(home, uint32(os.Getuid()), nil); !errors.Is(err, errTooManyFiles) {
		t.Errorf("psql files including past the bound: %v", err)
	}
}

// TestToolConfigNamedProtected: in a session rooted in the home, the program the owner's
// ~/.npmrc runs as its script shell, and the credential plugin ~/.kube/config runs, are
// read-only.
func TestToolConfigNamedProtected(t *testing.T) {
	t.Parallel()
	attackNamed(t, map[string]string{
		".npmrc":              "node-options=--require ~/repo/tools/pre.js\n",
		".kube/config":        "users:\n- name: u\n  user:\n    exec:\n      command: ~/repo/tools/kubecred\n",
		"repo/tools/pre.js":   "// pre\n",
		"repo/tools/kubecred": "#!/bin/sh\n",
	}, `( echo 'require("child_process")' >> tools/pre.js ) 2>/dev/null && echo 'ATTACK-WORKED npm node-options'; `+
		`( echo id >> tools/kube""cred ) 2>/dev/null && echo 'ATTACK-WORKED kube exec'; `)
}

// TestShellMovedToolConfigsRead: a tool's config a start-up file moves out of the home
// (KUBECONFIG, a colon list; NPM_CONFIG_USERCONFIG; AWS_CONFIG_FILE; PSQLRC; the dirs
// CARGO_HOME and GNUPGHOME; XDG_CONFIG_HOME's go/env; fish's set -gx as bash's export) is
// read as the home's would be for the programs it names: only the file itself was kept
// read-only, and the credential plugin a project's kubeconfig runs was writable. The files mvn
// and sensible-editor source are read as start-up files.
func TestShellMovedToolConfigsRead(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFiles(t, map[string]string{
		filepath.Join(home, ".bashrc"): "export KUBECONFIG=$HOME/x:~/p/kc NPM_CONFIG_USERCONFIG=~/p/npmrc\n" +
			"export AWS_CONFIG_FILE=~/p/aws PSQLRC=~/p/psqlrc CARGO_HOME=~/p/cargo\nexport XDG_CONFIG_HOME=~/p/xdg\n",
		filepath.Join(home, ".config/fish/config.fish"): "set -gx GNUPGHOME ~/p/gnupg\n",
		filepath.Join(home, "p/kc"):                     "users:\n- name: u\n  user:\n    exec:\n      command: ./tools/kubecred\n",
		filepath.Join(home, "p/npmrc"):                  "script-shell=~/p/tools/npmsh\n",
		filepath.Join(home, "p/aws"):                    "[default]\ncredential_process = ~/p/tools/awscred\n",
		filepath.Join(home, "p/psqlrc"):                 "\\! ~/p/tools/fromsql\n",
		filepath.Join(home, "p/cargo/config.toml"):      "[build]\nrustc-wrapper = \"/opt/w/wrap\"\n",
		filepath.Join(home, "p/gnupg/gpg-agent.conf"):   "pinentry-program ~/p/tools/pinentry\n",
		filepath.Join(home, "p/gnupg/gpg.conf"):         "photo-viewer ~/p/tools/viewer %i\nexec-path ~/p/gexec\n",
		filepath.Join(home, "p/cargo/config"):           "[build]\nrustflags = [\"-C\", \"linker=/opt/w/ld\", \"-Clink-arg=-fuse-ld=/opt/w/ld2\"]\n[env]\nLD_PRELOAD = \"/opt/w/pre.so\"\n[source.v]\ndirectory = \"/opt/w/vendor\"\n",
		filepath.Join(home, "p/xdg/go/env"):             "CC=/opt/w/cc\n",
		filepath.Join(home, ".mavenrc"):                 "JAVA_HOME=~/p/jdk\n",
		filepath.Join(home, ".bash_profile"):            "export DOCKER_CONFIG=~/p/docker\n",
		filepath.Join(home, "p/docker/config.json"):     `{"cliPluginsExtraDirs": ["/opt/w/dockerplugins"]}`,
		filepath.Join(home, ".selected_editor"):         "SELECTED_EDITOR=\"$HOME/p/tools/ed\"\n",
	})
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	shell, err := ShellNamedPaths(uid, gid, nil, home)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := ToolNamedPaths(uid, gid, nil, home)
	if err != nil {
		t.Fatal(err)
	}
	wantAmong(t, home, slices.Concat(shell, tools), "p/kc", "p/tools/kubecred", "p/npmrc", "p/tools/npmsh", "p/aws", "p/tools/awscred",
		"p/tools/fromsql", "p/cargo", "p/tools/pinentry", "/opt/w/wrap", "/opt/w/cc", "p/jdk", "p/tools/ed", "/opt/w/dockerplugins",
		"p/tools/viewer", "p/gexec", "/opt/w/ld", "/opt/w/ld2", "/opt/w/pre.so", "/opt/w/vendor")
	// The plan reads them too: a session rooted in the project, where the kubeconfig its
	// owner's .bashrc names runs ./tools/kubecred.
	attackNamed(t, map[string]string{
		".bashrc":             "export KUBECONFIG=~/repo/.kube.yaml\n",
		"repo/.kube.yaml":     "users:\n- name: u\n  user:\n    exec:\n      command: ./tools/kubecred\n",
		"repo/tools/kubecred": "#!/bin/sh\n",
	}, `( echo id >> tools/kube""cred ) 2>/dev/null && echo 'ATTACK-WORKED moved kubeconfig'; `)
}

// FuzzToolConfigNames: any file, read as each tool's config, parses without a panic and names
// only absolute, clean paths.
func FuzzToolConfigNames(f *testing.F) {
	for _, s := range []string{
		"script-shell=~/a\nnode-options=--require $HOME/b -r ${HOME}/c\n",
		"users:\n- user:\n    exec:\n      command: ./x\n      args:\n      - /y\n      args: [\"/z\", w]\n",
		"[build]\nrustc-wrapper = \"w/x\"\nrunner = [\n \"/r\", 'a',\n]\n[credential-alias]\nx = \"~/c d\"\n",
		"credential_process = ~/p q\npinentry-program /pin\n",
		"\\! ~/a\n\\setenv PAGER `/b`\n\\ir ../c\n\\o |/d\n\\copy x program '/e'\n",
		"[\"\\", "args:\n-", "\\ir ~", "x = ['", "command: \"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for rel, parse := range toolConfigs {
			n := parse(b, "/home/u", filepath.Dir(filepath.Join("/home/u", rel)))
			for _, p := range slices.Concat(n.named, n.includes) {
				if !filepath.IsAbs(p) || filepath.Clean(p) != p {
					t.Fatalf("%s: %q names %q", rel, b, p)
				}
			}
		}
	})
}
