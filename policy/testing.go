package policy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// testReport is the outcome of a test run in numbers.
type testReport struct {
	Pass, Fail, Errors int
	// Coverage is the percentage of policy (non-test) lines evaluated by the tests.
	Coverage float64
	// FileCoverage is per policy file.
	FileCoverage map[string]float64
}

// RunTests runs the embedded Rego tests plus customDir's *.rego and *_test.rego (as `opa test
// --coverage --fail-on-empty` would) and returns a human-readable report. ok is false when a
// test fails or errors, or when there are no tests. err is for modules that do not parse or
// compile. customDir "" runs the embedded tests only.
//
// The embedded tests run against the embedded policy alone (an admin's deny rules would
// rightly fail them); the custom tests run against the embedded policy plus the custom modules.
func RunTests(ctx context.Context, customDir string) (report string, ok bool, err error) {
	mods, err := embeddedModules(true)
	if err != nil {
		return "", false, err
	}
	r, text, err := runTests(ctx, mods, "")
	if err != nil {
		return "", false, err
	}
	ok = r.Fail == 0 && r.Errors == 0 && r.Pass > 0
	report = "== embedded policy ==\n" + text
	if customDir == "" {
		return report, ok, nil
	}
	if _, err := os.Stat(customDir); errors.Is(err, fs.ErrNotExist) {
		// A host without custom policy: nothing of its own to test.
		return report + "\n== custom policy (" + customDir + ") ==\nno such directory: no custom policy to test (--dir names another)\n", ok, nil
	}
	// Read with the caller's own privileges (sbctl runs as the admin); no owner check, since
	// nothing here feeds a decision.
	dm, err := dirModules(ctx, customDir, false, true)
	if err != nil {
		return "", false, err
	}
	mods, err = embeddedModules(false)
	if err != nil {
		return "", false, err
	}
	for k, v := range dm {
		mods[k] = v
	}
	r, text, err = runTests(ctx, mods, "")
	if err != nil {
		return "", false, err
	}
	report += "\n== custom policy (" + customDir + ") ==\n" + text
	if r.Pass+r.Fail+r.Errors == 0 {
		// Failing on no tests is opa test --fail-on-empty's rule; the exit alone would not say why.
		report += "no tests: write test_ rules in *_test.rego files beside the modules (e.g. package sandboxd.custom_test)\n"
	}
	return report, ok && r.Fail == 0 && r.Errors == 0 && r.Pass > 0, nil
}

func runTests(ctx context.Context, mods map[string]string, filter string) (testReport, string, error) {
	parsed := make(map[string]*ast.Module, len(mods))
	for name, src := range mods {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			return testReport{}, "", fmt.Errorf("%w: %w", ErrPolicyCompile, err)
		}
		if !strings.HasPrefix(name, "embedded:") && !strings.HasSuffix(name, "_test.rego") && !m.Package.Path.HasPrefix(customPackage) {
			return testReport{}, "", fmt.Errorf("%s: %w (got package %s)", name, ErrCustomPackage, m.Package.Path)
		}
		parsed[name] = m
	}
	cov := cover.New()
	store := inmem.New()
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return testReport{}, "", fmt.Errorf("open test store: %w", err)
	}
	defer store.Abort(ctx, txn)
	runner := tester.NewRunner().
		SetModules(parsed).
		SetStore(store).
		SetCoverageQueryTracer(cov).
		RaiseBuiltinErrors(true).
		SetDefaultRegoVersion(ast.RegoV1).
		SetTimeout(30 * time.Second).
		Filter(filter)
	compileMu.Lock() // the runner compiles the modules too (compileMu)
	ch, err := runner.RunTests(ctx, txn)
	compileMu.Unlock()
	if err != nil {
		return testReport{}, "", fmt.Errorf("%w: %w", ErrPolicyCompile, err)
	}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	var rep testReport
	for _, r := range results {
		switch {
		case r.Error != nil:
			rep.Errors++
		case len(r.SubResults) > 0:
			for _, sr := range r.SubResults.Iter {
				if len(sr.SubResults) > 0 {
					continue
				}
				if sr.Fail {
					rep.Fail++
				} else {
					rep.Pass++
				}
			}
		case r.Fail:
			rep.Fail++
		case r.Skip:
		default:
			rep.Pass++
		}
	}
	var buf bytes.Buffer
	ch2 := make(chan *tester.Result, len(results))
	for _, r := range results {
		ch2 <- r
	}
	close(ch2)
	if err := (tester.PrettyReporter{Output: &buf, Verbose: false, FailureLine: true}).Report(ch2); err != nil {
		return testReport{}, "", err
	}
	policyMods := map[string]*ast.Module{}
	for n, m := range parsed {
		if !strings.HasSuffix(n, "_test.rego") {
			policyMods[n] = m
		}
	}
	cr := cov.Report(policyMods)
	rep.FileCoverage = map[string]float64{}
	names := make([]string, 0, len(cr.Files))
	covered, total := 0, 0
	for n, f := range cr.Files {
		if policyMods[n] == nil {
			continue // the tests themselves
		}
		rep.FileCoverage[n] = f.Coverage
		names = append(names, n)
		covered += f.CoveredLines
		total += f.CoveredLines + f.NotCoveredLines
	}
	if total > 0 {
		rep.Coverage = 100 * float64(covered) / float64(total)
	}
	sort.Strings(names)
	fmt.Fprintf(&buf, "coverage: %.1f%% of policy lines\n", rep.Coverage)
	for _, n := range names {
		fmt.Fprintf(&buf, "  %6.1f%%  %s\n", rep.FileCoverage[n], n)
	}
	return rep, buf.String(), nil
}
