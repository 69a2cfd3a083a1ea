package slack

import (
	"strings"

	"github.com/apollo-11/apollo/notify"
)

// mrkdwn turns our markdown into Slack's: **bold** becomes *bold*,
// [text](url) becomes <url|text>, headings become bold lines (the header
// block already shows the title), "- " items become bullets, and &, < and
// > are escaped as Slack requires.
func mrkdwn(md string) string {
	body := notify.MarkdownBody(md, func(s string) string { return "**" + s + "**" })
	lines := strings.Split(body, "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "- "); ok {
			l = "• " + rest
		}
		lines[i] = inline(l)
	}
	return strings.Join(lines, "\n")
}

// inline converts bold and links in one line and escapes the rest.
func inline(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "**"):
			b.WriteByte('*')
			i += 2
		case s[i] == '[':
			if text, url, n, ok := link(s[i:]); ok {
				b.WriteString("<" + escapeURL(url) + "|" + escape(text) + ">")
				i += n
				continue
			}
			b.WriteByte('[')
			i++
		default:
			j := i + 1
			for j < len(s) && s[j] != '[' && !strings.HasPrefix(s[j:], "**") {
				j++
			}
			b.WriteString(escape(s[i:j]))
			i = j
		}
	}
	return b.String()
}

// link parses "[text](url)" at the start of s and returns its length.
func link(s string) (text, url string, n int, ok bool) {
	end := strings.Index(s, "](")
	if end < 0 {
		return "", "", 0, false
	}
	stop := strings.IndexByte(s[end+2:], ')')
	if stop < 0 {
		return "", "", 0, false
	}
	text, url = s[1:end], s[end+2:end+2+stop]
	if strings.ContainsAny(text, "[]") || url == "" || strings.ContainsAny(url, " \t") {
		return "", "", 0, false
	}
	return text, url, end + 2 + stop + 1, true
}

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escape makes text safe for mrkdwn: Slack reads <…> as links and
// mentions, and & as the start of an escape.
func escape(s string) string { return escaper.Replace(s) }

// escapeURL keeps a URL from ending the <url|text> it sits in.
func escapeURL(u string) string { return strings.ReplaceAll(escape(u), "|", "%7C") }
