package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "batch_orders-0042", "batch_orders-0042"},
		{"other scripts and emoji", "日报_导出 ✅ café", "日报_导出 ✅ café"},
		{"title, bell, clear, colour", "x\x1b]0;pwned\a\x1b[2J\x1b[31m", `x\u001b]0;pwned\u0007\u001b[2J\u001b[31m`},
		{"one line", "a\tb\nc\rd", `a\tb\nc\rd`},
		{"DEL", "a\x7fb", `a\u007fb`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"bidi override", "invoice\u202Efdp.exe", `invoice\u202efdp.exe`},
		{"bidi isolates and marks", "\u2066\u2069\u200e\u061c", `\u2066\u2069\u200e\u061c`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"not UTF-8", "a\x9b2Jb\xff", `a\x9b2Jb\xff`},
		{"backslashes stay", `C:\jobs\x1b`, `C:\jobs\x1b`},
		// A name that draws like another: "job-1" with a zero width space.
		{"invisible", "job\u200b-1\u2060\ufeff\u00ad\u3164", `job\u200b-1\u2060\ufeff\u00ad\u3164`},
		{"tag characters", "ok\U000E0041\U000E007F", `ok\udb40\udc41\udb40\udc7f`},
		{"joiners of emoji and scripts stay", "👩\u200d💻 می\u200cخواهم", "👩\u200d💻 می\u200cخواهم"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Escape(tc.in); got != tc.want {
				t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestEscapeLines(t *testing.T) {
	t.Parallel()
	in := "2 problems:\n  jobs.yaml:2: \x1b[2Jname\n  \x07"
	want := "2 problems:\n  jobs.yaml:2: \\u001b[2Jname\n  \\u0007"
	if got := EscapeLines(in); got != want {
		t.Errorf("EscapeLines(%q) = %q, want %q", in, got, want)
	}
}

// FuzzEscape: whatever the input, the output holds nothing a terminal
// acts on and is UTF-8; input with nothing to escape comes back as it is;
// EscapeLines keeps exactly the input's lines.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]0;t\a", "a\u202eb", "\xff\xfe", "\u009b", "a\nb\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Escape(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, out)
		}
		clean := true
		for i, r := range s {
			_, n := utf8.DecodeRuneInString(s[i:])
			if needsEscape(r, n) {
				clean = false
			}
		}
		for i, r := range out {
			if _, n := utf8.DecodeRuneInString(out[i:]); needsEscape(r, n) {
				t.Fatalf("Escape(%q) = %q holds %U", s, out, r)
			}
		}
		if clean && out != s {
			t.Fatalf("Escape(%q) = %q, want it unchanged", s, out)
		}
		lines := EscapeLines(s)
		if strings.Count(lines, "\n") != strings.Count(s, "\n") {
			t.Fatalf("EscapeLines(%q) = %q: lines changed", s, lines)
		}
		for _, l := range strings.Split(lines, "\n") {
			if strings.ContainsFunc(l, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
				t.Fatalf("EscapeLines(%q) = %q: a control character left", s, lines)
			}
		}
	})
}
