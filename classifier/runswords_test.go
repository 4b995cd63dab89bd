package classifier

import (
	"strings"
	"testing"
)

// TestRunsItsWords: the commands whose words may be a program or code, and those whose words
// are data only.
func TestRunsItsWords(t *testing.T) {
	for line, want := range map[string]bool{
		"bash -c x": true, "zsh5 x": true, "timeout 5 x": true, "sshpass -p x ssh h": true,
		"python3.12 x": true, "node x": true, "find . -exec x": true, "sed e": true, "make x": true,
		"xargs x": true, "env x": true, "sudo x": true, "valgrind.bin x": true, "ld-linux-x86-64.so.2 x": true,
		"rg --pre x": true, "tar -I x": true, "npm exec x": true, "docker run img x": true, "docker --context c run img x": true, "npm --prefix d exec x": true,
		"git -c core.sshCommand=x fetch": true, "git --config-env=a=b x": true, "git rebase --exec x": true,
		"git myalias x": true, "git clone ext::sh": true, "git": true, "": true,
		"repeat 3 x": true, "nocorrect x": true, "=bash x": true,
		"curl -H x": false, "echo x": false, "npm config set k x": false, "docker login -p x": false,
		"git clone https://t@h/r": false, "git -C d push origin x": false, "gh api x": false, "mysql -px": false,
	} {
		if got := RunsItsWords(strings.Fields(line)); got != want {
			t.Errorf("%q: %v, want %v", line, got, want)
		}
	}
}
