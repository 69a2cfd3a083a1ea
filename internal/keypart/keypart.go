package keypart

import "strings"

// Escape percent-escapes the bytes that delimit keys (':', and '{' '}',
// Redis Cluster's hash tags), '%' itself, and control bytes. Anything
// else is left alone, so the usual names stay readable and keep the keys
// they had.
func Escape(s string) string {
	if !strings.ContainsFunc(s, needsEscape) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(rune(c)) {
			b.WriteByte('%')
			b.WriteByte("0123456789ABCDEF"[c>>4])
			b.WriteByte("0123456789ABCDEF"[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r == ':' || r == '{' || r == '}' || r == '%' || r < 0x20 || r == 0x7f
}
