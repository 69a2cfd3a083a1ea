package termtext

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Escape makes text from the server safe to print on a terminal. Task IDs,
// job names, summaries and messages are chosen by whoever reports them, and
// a control character among them is an instruction to the terminal: ESC
// starts sequences that set the window title, clear the screen or recolour
// what follows, BEL rings, a bidi override reorders the rest of the line.
// Escape writes each such character as a visible escape instead: the C0
// controls (tab, newline and carriage return too, so one value stays on
// one line), DEL, the C1 controls, the Unicode bidi controls, the line
// and paragraph separators, and the characters that draw nothing (zero
// width space, word joiner, byte order mark, soft hyphen, Hangul fillers,
// tag characters), which would make "job\u200b-1" read as "job-1" beside
// it. Zero width (non-)joiners stay: emoji and several scripts need them.
// The escapes are JSON's (\t, \n, \r, \u001b, a pair for a character
// beyond U+FFFF),
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
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			b.WriteString(`\u`)
			writeHex(&b, uint32(r1), 4)
			b.WriteString(`\u`)
			writeHex(&b, uint32(r2), 4)
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
	case r == 0x00ad, r == 0x180e, r == 0x200b, // soft hyphen, Mongolian vowel separator, zero width space
		r >= 0x2060 && r <= 0x2064,                         // word joiner, invisible operators
		r == 0xfeff,                                        // byte order mark
		r == 0x115f, r == 0x1160, r == 0x3164, r == 0xffa0, // Hangul fillers
		r >= 0xe0000 && r <= 0xe007f: // tags
		return true
	}
	return false
}

func writeHex(b *strings.Builder, v uint32, digits int) {
	h := strconv.FormatUint(uint64(v), 16)
	b.WriteString(strings.Repeat("0", digits-len(h)))
	b.WriteString(h)
}
