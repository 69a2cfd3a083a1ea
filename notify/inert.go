package notify

import (
	"maps"
	"strings"
	"unicode"

	apollo "github.com/apollo-11/apollo"
)

// Text that reporters and rule authors supply (job names, run IDs, the
// summaries built from them, groups, labels) reaches chat robots, Slack and
// mail inside our own markup. Before a template places it, it is made
// inert in every channel's markup at once: the characters that open a link,
// a mention, a tag or a heading become full-width forms that read the same
// and mean nothing, a URL's "://" becomes "：//" so no client links it, and
// control characters (a newline would start a line of markup; an escape
// sequence would reach a console) become spaces. That covers [text](url)
// and ![](url) in markdown; <a>, <url> autolinks, Slack's <!channel> and
// <url|text>, WeCom's <@user> and Feishu's <at>; "@all" and "@138…" in
// DingTalk and WeCom text; and "### FAKE" headings. Email's HTML part is
// escaped by html/template on top.
var (
	inertText = strings.NewReplacer("[", "［", "]", "］", "<", "＜", "@", "＠", "#", "＃", "://", "：//")
	// Label values keep their URLs: a runbook link is what a rule author
	// puts there on purpose, and it shows where it goes.
	inertLabel = strings.NewReplacer("[", "［", "]", "］", "<", "＜", "@", "＠", "#", "＃")
)

// inert makes s inert in every channel's markup (see above); r is
// inertText, or inertLabel for label values.
func inert(s string, r *strings.Replacer) string {
	s = strings.Map(func(c rune) rune {
		switch {
		case unicode.IsControl(c), unicode.In(c, unicode.Zl, unicode.Zp):
			return ' '
		case unicode.Is(unicode.Bidi_Control, c):
			return -1 // would reorder what people read
		}
		return c
	}, s)
	return r.Replace(s)
}

// inertAlert returns a copy of a with every user-supplied text made inert.
// The rule's expression is our own canonical rendering and stays as it is.
func inertAlert(a apollo.Alert) apollo.Alert {
	a.Rule = inert(a.Rule, inertText)
	a.Group = inert(a.Group, inertText)
	a.Summary = inert(a.Summary, inertText)
	a.AckedBy = inert(a.AckedBy, inertText)
	if a.TopNames != nil {
		names := make([]string, len(a.TopNames))
		for i, n := range a.TopNames {
			names[i] = inert(n, inertText)
		}
		a.TopNames = names
	}
	if a.Labels != nil {
		labels := make(map[string]string, len(a.Labels))
		for k, v := range maps.All(a.Labels) {
			labels[inert(k, inertText)] = inert(v, inertLabel)
		}
		a.Labels = labels
	}
	return a
}
