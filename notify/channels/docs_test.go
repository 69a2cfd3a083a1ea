package channels

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/notify"
	"go.yaml.in/yaml/v3"
)

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// Every channels: snippet in docs/notifications.md builds, and all of them
// together make a dispatcher (so their template overrides are valid): the
// documentation cannot drift from the code.
func TestDocumentedChannelsBuild(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/notifications.md")
	if err != nil {
		t.Fatal(err)
	}
	// What the config loader does with ${VAR}; DingTalk secrets start with SEC.
	expand := func(name string) string {
		if strings.Contains(name, "SECRET") {
			return "SECdocs"
		}
		return "docs-value"
	}
	var chs []notify.Channel
	for _, m := range yamlBlock.FindAllStringSubmatch(string(doc), -1) {
		var cfg struct {
			Channels map[string]map[string]any `yaml:"channels"`
		}
		if err := yaml.Unmarshal([]byte(os.Expand(m[1], expand)), &cfg); err != nil {
			t.Fatalf("%v in\n%s", err, m[1])
		}
		for name, raw := range cfg.Channels {
			typ, _ := raw["type"].(string)
			ch, err := Build(name, typ, raw, BuildOptions{})
			if err != nil {
				t.Errorf("documented channel %s: %v", name, err)
				continue
			}
			chs = append(chs, ch)
		}
	}
	if len(chs) < 10 {
		t.Fatalf("found %d documented channels; did the examples move?", len(chs))
	}
	if _, err := notify.NewDispatcher(chs, notify.Options{}); err != nil {
		t.Fatal(err)
	}
}
