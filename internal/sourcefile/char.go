package sourcefile

import (
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// Char is a character of a file that YAML does not allow, and where it
// is: line and column are 1-based, the column counted in characters.
type Char struct {
	Line, Col int
	Message   string // "a control character (U+001B) is not allowed in a jobs file"
	Hint      string // what to do
}

// refusedRe matches the YAML library's messages about a character it
// refuses, which carry no line (or the line of the block it is in).
var refusedRe = regexp.MustCompile(`control characters are not allowed|UTF-8|invalid Unicode character`)

// Refused reports whether msg, an error of the YAML library, is about a
// character it does not allow: BadChar finds it.
func Refused(msg string) bool { return refusedRe.MatchString(msg) }

// BadChar returns the first character of src that YAML does not allow,
// with its line, column and code, or nil. what names the file in the
// message ("a jobs file"). A control character is often invisible, and
// pasted with a value: its place is what the user needs.
func BadChar(src []byte, what string) *Char {
	line, col := 1, 1
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return &Char{Line: line, Col: col, Message: fmt.Sprintf("a byte that is not UTF-8 (0x%02X)", src[i]),
				Hint: "save the file as UTF-8"}
		case !yamlAllows(r):
			esc := fmt.Sprintf(`"\x%02x"`, r)
			if r > 0xFF {
				esc = fmt.Sprintf(`"\u%04x"`, r)
			}
			kind := "a control character"
			if !unicode.IsControl(r) {
				kind = "the character"
			}
			return &Char{Line: line, Col: col, Message: fmt.Sprintf("%s (U+%04X) is not allowed in %s", kind, r, what),
				Hint: fmt.Sprintf("remove it; in a double-quoted value write it as an escape, like %s", esc)}
		}
		i += n
		switch {
		case r == '\r' && i < len(src) && src[i] == '\n': // one break, counted at the \n
		case r == '\n', r == '\r', r == 0x85, r == 0x2028, r == 0x2029:
			line, col = line+1, 1
		default:
			col++
		}
	}
	return nil
}

// yamlAllows reports whether YAML takes r anywhere in a file.
func yamlAllows(r rune) bool {
	return r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0x7E) || r == 0x85 ||
		(r >= 0xA0 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF)
}
