package rules

import (
	"os"
	"strings"
	"testing"
)

// TestDocs keeps docs/rules.md honest: every ```rules and ```json block
// parses, and
// every ```rules-error block fails with exactly the ```text block after it.
func TestDocs(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile("../docs/rules.md")
	if err != nil {
		t.Fatal(err)
	}
	type block struct{ lang, body string }
	var blocks []block
	var cur *block
	indent := ""
	for line := range strings.Lines(string(md)) {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			indent = line[:len(line)-len(trimmed)]
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += strings.TrimPrefix(line, indent)
		}
	}
	good, bad := 0, 0
	for i, b := range blocks {
		switch b.lang {
		case "rules", "json":
			good++
			f, err := ParseFile("rules.txt", []byte(b.body))
			if err != nil || len(f.Rules)+len(f.Inhibits) == 0 {
				t.Errorf("example %d does not parse:\n%s\n%v", good, b.body, err)
			}
		case "rules-error":
			bad++
			_, err := ParseFile("rules.txt", []byte(b.body))
			if i+1 >= len(blocks) || blocks[i+1].lang != "text" {
				t.Fatalf("rules-error block %d is not followed by a text block", bad)
			}
			if want := strings.TrimSpace(blocks[i+1].body); err == nil || err.Error() != want {
				t.Errorf("rules-error block %d:\n got: %v\nwant: %s", bad, err, want)
			}
		}
	}
	if good < 13 || bad < 1 {
		t.Errorf("found %d rules examples and %d error examples; the docs lost some", good, bad)
	}
}
