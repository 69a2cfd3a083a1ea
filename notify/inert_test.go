package notify

import (
	"strings"
	"testing"
	"unicode"
)

// FuzzInert: whatever a reporter sends, what a template places holds no
// character that opens a link, a mention, a tag or a heading in any
// channel's markup, no "://" outside label values, and no control or
// bidi character.
func FuzzInert(f *testing.F) {
	for _, s := range []string{"[x](http://evil.example)", "<!channel> <@u> <at user_id=\"all\">", "@all",
		"line\n### heading", "\x1b]0;t\x07", "a\u202eb", ":\u200e//", "batch_a", "日志@主机"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range []*strings.Replacer{inertText, inertLabel} {
			out := inert(s, r)
			if strings.ContainsAny(out, "[]<@#") || (r == inertText && strings.Contains(out, "://")) {
				t.Fatalf("inert(%q) = %q", s, out)
			}
			for _, c := range out {
				if unicode.IsControl(c) || unicode.Is(unicode.Bidi_Control, c) || unicode.In(c, unicode.Zl, unicode.Zp) {
					t.Fatalf("inert(%q) = %q keeps %U", s, out, c)
				}
			}
		}
	})
}
