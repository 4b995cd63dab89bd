package executor

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/errcode"
)

// A cell's id is repeated beside each of its outputs: a small notebook of one long id and
// many empty outputs must not make the daemon build text in proportion to their product.
func TestFormatNotebookBoundsRepeatedID(t *testing.T) {
	outputs := make([]map[string]any, 2000)
	for i := range outputs {
		outputs[i] = map[string]any{"output_type": "stream", "text": "x"}
	}
	nb, err := json.Marshal(map[string]any{
		"cells":    []any{map[string]any{"id": strings.Repeat("A", 100_000), "cell_type": "code", "source": "x", "outputs": outputs}},
		"metadata": map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	blocks, err := formatNotebook("/n.ipynb", nb)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, b := range blocks {
		n += len(b.Text) + len(b.Data)
	}
	if n > readMaxOutputBytes+2<<10 {
		t.Errorf("a %d-byte notebook made %d bytes of text, over %d", len(nb), n, readMaxOutputBytes)
	}
	if !strings.Contains(blocks[len(blocks)-1].Text, "[notebook truncated") {
		t.Error("the cut text does not say it was cut")
	}
	// The input (about 180 KB) is decoded once and the text built once: a few MB at most,
	// where the unbounded text took over 400 MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("formatting allocated %d MB", got>>20)
	}
}

// TestNotebookValuesBounded: a notebook of millions of tiny elements (`{}` or `null` outputs,
// `""` traceback lines, a few bytes each, decoded into a struct of a hundred) is refused before
// anything is decoded: one 10 MB file took the daemon 1.1 GB. What is inside strings (code,
// escaped quotes) does not count.
func TestNotebookValuesBounded(t *testing.T) {
	for _, elem := range []string{"{}", "null"} {
		outputs := strings.Repeat(elem+",", notebookMaxValues) + elem
		_, err := formatNotebook("/n.ipynb", []byte(`{"cells":[{"cell_type":"code","source":"x","outputs":[`+outputs+`]}]}`))
		if errcode.Of(err) != errcode.TooLarge || !strings.Contains(err.Error(), "jq") {
			t.Fatalf("a notebook of %d %s outputs: %v, want too_large naming a way to read it", notebookMaxValues+1, elem, err)
		}
	}
	code, _ := json.Marshal(strings.Repeat(`{"a": "\"{", [1,2]}`, notebookMaxValues))
	blocks, err := formatNotebook("/n.ipynb", []byte(`{"cells":[{"cell_type":"code","source":`+string(code)+`,"outputs":[]}]}`))
	if err != nil || len(blocks) == 0 {
		t.Fatalf("a cell of code full of braces and commas: %v", err)
	}
	if n := jsonValues([]byte(`{"a":"{\\\",[{","b":[{},{"c":"}"}]}`), 10); n != 6 {
		t.Errorf("jsonValues = %d, want 6", n)
	}
}
