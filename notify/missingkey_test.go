package notify

import (
	"strings"
	"testing"

	apollo "github.com/apollo-11/apollo"
)

// A channel's template that shows a label renders nothing for an alert
// whose rule has no such label, in every part: before, text/template wrote
// "<no value>" into the message ("Runbook: <no value>"), which a markdown
// robot may take for a tag.
func TestMissingLabelRendersEmpty(t *testing.T) {
	t.Parallel()
	r := mustRenderer(t, "en", "", map[apollo.NotificationKind]string{
		"firing": `{{define "title"}}{{.Alert.Rule}} {{.Alert.Labels.team}}{{end}}` +
			`{{define "html"}}<p>Runbook: {{.Alert.Labels.runbook}}</p>{{end}}` +
			`Runbook: {{.Alert.Labels.runbook}}.`})
	for _, labels := range []map[string]string{nil, {"team": "data"}} {
		n := SampleNotification(apollo.NotifyFiring)
		n.Alert.Labels = labels
		m, err := r.render(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		for part, s := range map[string]string{"title": m.Title, "text": m.Text, "markdown": m.Markdown, "html": m.HTML} {
			if strings.Contains(s, "no value") {
				t.Errorf("labels %v: the %s says %q", labels, part, s)
			}
		}
		if m.Text != "Runbook: ." {
			t.Errorf("labels %v: text %q, want %q", labels, m.Text, "Runbook: .")
		}
	}
}
