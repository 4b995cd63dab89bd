package classifier

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

const benchOneLiner = `git log --oneline -n 20 | grep -i fix | head -5 && ls -la src`

// benchBuild runs programs no table describes, whose words are read as the command lines
// they may run.
const benchBuild = `npm run build -- --mode production && go test ./... -run TestServe -count=1 && docker build -t app:dev .`

var benchScript = strings.Repeat(`if [ -f go.mod ]; then cat go.mod | grep module; fi
for f in $(git ls-files '*.go'); do wc -l "$f"; done
find . -name '*.md' -type f | sort | uniq -c > /dev/null 2>&1
`, 10)

func benchParse(b *testing.B, src string) {
	p := syntax.NewParser(syntax.Variant(syntax.LangBash))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Parse(strings.NewReader(src), ""); err != nil {
			b.Fatal(err)
		}
	}
}

func benchClassify(b *testing.B, src string) {
	b.ReportAllocs()
	for b.Loop() {
		if c := Classify(src, testOpts); c.ParseError != nil {
			b.Fatal(*c.ParseError)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	b.Run("oneliner", func(b *testing.B) { benchParse(b, benchOneLiner) })
	b.Run("script30", func(b *testing.B) { benchParse(b, benchScript) })
}

func BenchmarkClassify(b *testing.B) {
	b.Run("oneliner", func(b *testing.B) { benchClassify(b, benchOneLiner) })
	b.Run("script30", func(b *testing.B) { benchClassify(b, benchScript) })
	b.Run("build", func(b *testing.B) { benchClassify(b, benchBuild) })
}
