package feishu

import "github.com/apollo-11/apollo/notify"

// cardMarkdown adapts our markdown to a card's markdown element, which
// has no headings: the card header already shows the title, so the leading
// heading is dropped, and any other heading becomes a bold line.
func cardMarkdown(md string) string {
	return notify.MarkdownBody(md, func(s string) string { return "**" + s + "**" })
}
