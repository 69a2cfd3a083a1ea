package notify

import "strings"

// The default Markdown bodies start with a "### Title" line. Channels whose
// message has a header of its own (a Feishu card, Slack's header block)
// drop that line, and those whose markdown has no headings turn the others
// into bold lines; these two helpers are what they share.

// MarkdownHeading returns the text of an ATX heading line ("### Title"):
// one to six #, then a space or the end, indented at most three spaces.
func MarkdownHeading(line string) (string, bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, "#") {
		return "", false
	}
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n > 6 || (len(t) > n && t[n] != ' ' && t[n] != '\t') {
		return "", false
	}
	return strings.TrimSpace(t[n:]), true
}

// MarkdownBody returns md without a heading on its first line, and with
// every other heading replaced by bold(its text).
func MarkdownBody(md string, bold func(string) string) string {
	lines := strings.Split(md, "\n")
	out := lines[:0]
	for i, l := range lines {
		text, ok := MarkdownHeading(l)
		switch {
		case !ok:
			out = append(out, l)
		case i == 0 || text == "":
			// the title, which the channel shows in its own header
		default:
			out = append(out, bold(text))
		}
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}
