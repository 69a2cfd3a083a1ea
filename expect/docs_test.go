package expect

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocs keeps docs/expectations.md honest: every ```yaml block parses,
// the first shows every key, and every ```yaml-error block fails with
// exactly the ```text block after it.
func TestDocs(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile("../docs/expectations.md")
	if err != nil {
		t.Fatal(err)
	}
	type block struct{ lang, body string }
	var blocks []block
	for _, part := range strings.Split(string(md), "```")[1:] {
		lang, body, _ := strings.Cut(part, "\n")
		blocks = append(blocks, block{lang, body})
	}
	good, bad := 0, 0
	for i := 0; i < len(blocks); i += 2 { // odd parts are the prose between blocks
		b := blocks[i]
		switch b.lang {
		case "yaml":
			good++
			if _, err := Parse("expect.yaml", []byte(b.body)); err != nil {
				t.Errorf("yaml block %d does not parse:\n%s\n%v", good, b.body, err)
			}
			if good > 1 {
				continue
			}
			seen := map[string]bool{}
			for _, m := range regexp.MustCompile(`(?m)^\s+-?\s*\{?([a-z_]+):`).FindAllStringSubmatch(b.body, -1) {
				seen[m[1]] = true
			}
			for _, key := range append(append(expFields, flappingFields...), defaultsFields...) {
				if !seen[key] {
					t.Errorf("the documented file does not show the key %q", key)
				}
			}
		case "yaml-error":
			bad++
			_, err := Parse("expect.yaml", []byte(b.body))
			if i+2 >= len(blocks) || blocks[i+2].lang != "text" {
				t.Fatalf("yaml-error block %d is not followed by a text block", bad)
			}
			if want := strings.TrimSpace(blocks[i+2].body); err == nil || err.Error() != want {
				t.Errorf("yaml-error block %d:\n got: %v\nwant: %s", bad, err, want)
			}
		}
	}
	if good < 1 || bad < 1 {
		t.Errorf("found %d yaml blocks and %d error blocks; the docs lost some", good, bad)
	}
}
