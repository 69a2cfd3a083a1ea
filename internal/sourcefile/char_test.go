package sourcefile

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBadChar(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		line, col int
		message   string
	}{
		{"none", "a: b\n", 0, 0, ""},
		{"escape", "a: b\n\n  c: \"d\x1b[2J\"\n", 3, 8, "a control character (U+001B) is not allowed in a jobs file"},
		{"after UTF-8", "a: très\x00\n", 1, 8, "a control character (U+0000) is not allowed in a jobs file"},
		{"not UTF-8", "a: b\r\nc: \xff\n", 2, 4, "a byte that is not UTF-8 (0xFF)"},
		{"noncharacter", "a: \uFFFE\n", 1, 4, "the character (U+FFFE) is not allowed in a jobs file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := BadChar([]byte(tc.src), "a jobs file")
			if tc.line == 0 {
				if c != nil {
					t.Fatalf("BadChar = %+v, want none", c)
				}
				return
			}
			if c == nil || c.Line != tc.line || c.Col != tc.col || c.Message != tc.message || c.Hint == "" {
				t.Fatalf("BadChar = %+v, want %d:%d %q with a hint", c, tc.line, tc.col, tc.message)
			}
		})
	}
}

// FuzzBadChar: BadChar finds a character exactly when the text is not
// UTF-8 or holds one YAML refuses, and places it inside the text.
func FuzzBadChar(f *testing.F) {
	for _, s := range []string{"a: b\n", "a: \x1b\n", "\xff", "a\r\nb\r\x85\u2028c\x00", "jobs:\n  - name: tr\u00e9s\x07\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c := BadChar(src, "a jobs file")
		clean := utf8.Valid(src) && strings.IndexFunc(string(src), func(r rune) bool { return !yamlAllows(r) }) < 0
		if (c == nil) != clean {
			t.Fatalf("BadChar(%q) = %+v", src, c)
		}
		if c != nil && (c.Line < 1 || c.Col < 1 || c.Line > bytes.Count(src, []byte{'\n'})+bytes.Count(src, []byte{'\r'})+len(src)+1 || c.Message == "" || c.Hint == "") {
			t.Fatalf("BadChar(%q) = %+v: no place or no words", src, c)
		}
	})
}
