package termtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape makes text from the server safe to print on a terminal. Task IDs,
// job names, summaries and messages are chosen by whoever reports them, and
// a control character among them is an instruction to the terminal: ESC
// starts sequences that set the window title, clear the screen or recolour
// what follows, BEL rings, a bidi override reorders the rest of the line.
// Escape writes each such character as a visible escape instead: the C0
// controls (tab, newline and carriage return too, so one value stays on
// one line), DEL, the C1 controls, the Unicode bidi controls and the line
// and paragraph separators. The escapes are JSON's (\t, \n, \r, \u001b),
// so escaped JSON text stays valid JSON; a byte that is not UTF-8 is
// written \xNN. Everything else, including every other script and emoji,
// is kept.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s // the common case: nothing to escape, no copy
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !needsEscape(r, n) {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			writeHex(&b, uint32(s[i]), 2)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		default:
			b.WriteString(`\u`)
			writeHex(&b, uint32(r), 4)
		}
		i += n
	}
	return b.String()
}

// EscapeLines is Escape for text of several lines, such as an error
// message that lists problems: the newlines stay, every other control
// character is escaped.
func EscapeLines(s string) string {
	if !strings.Contains(s, "\n") {
		return Escape(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

func needsEscape(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1: // not UTF-8
		return true
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, // ALM, LRM, RLM
		r >= 0x202a && r <= 0x202e, // LRE, RLE, PDF, LRO, RLO
		r >= 0x2066 && r <= 0x2069, // LRI, RLI, FSI, PDI
		r == 0x2028, r == 0x2029:   // line and paragraph separators
		return true
	}
	return false
}

func writeHex(b *strings.Builder, v uint32, digits int) {
	h := strconv.FormatUint(uint64(v), 16)
	b.WriteString(strings.Repeat("0", digits-len(h)))
	b.WriteString(h)
}
