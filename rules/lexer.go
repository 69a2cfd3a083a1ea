package rules

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF    tokKind = iota
	tBad            // a malformed token; the lexer has reported it
	tIdent          // [A-Za-z_][A-Za-z0-9_.-]*: keys, names, metrics, and/or/not
	tString         // text is the value, escapes resolved
	tNumber         // text is the literal with its unit: 5m, 0.05, 5%, -20%
	tColon
	tComma
	tAssign
	tLParen
	tRParen
	tCmp // > >= < <= == !=
)

type token struct {
	kind tokKind
	text string
	pos  Pos
}

// describe names a token in an error message.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string " + clip(t.text)
	case tNumber:
		return "number " + t.text
	}
	return clip(t.text)
}

// lexer turns source into tokens on demand. It reports malformed tokens
// itself and hands the parser a tBad so that nothing is reported twice.
type lexer struct {
	src       string
	off       int
	file      string
	line, col int
	errs      *errs
}

func newLexer(src string, at Pos, e *errs) *lexer {
	return &lexer{src: src, file: at.File, line: at.Line, col: at.Col, errs: e}
}

func (l *lexer) pos() Pos { return Pos{File: l.file, Line: l.line, Col: l.col} }

// advance moves past one character, counting lines and characters.
func (l *lexer) advance() {
	if l.src[l.off] == '\n' {
		l.off++
		l.line, l.col = l.line+1, 1
		return
	}
	_, n := utf8.DecodeRuneInString(l.src[l.off:])
	l.off += n
	l.col++
}

// take consumes characters while ok holds; they are all ASCII.
func (l *lexer) take(ok func(byte) bool) {
	for l.off < len(l.src) && ok(l.src[l.off]) {
		l.off++
		l.col++
	}
}

func (l *lexer) skipSpace() {
	for l.off < len(l.src) {
		switch l.src[l.off] {
		case ' ', '\t', '\r', '\n':
			l.advance()
		case '#':
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance()
			}
		default:
			return
		}
	}
}

func (l *lexer) next() token {
	l.skipSpace()
	p, start := l.pos(), l.off
	if l.off >= len(l.src) {
		return token{kind: tEOF, pos: p}
	}
	c := l.src[l.off]
	switch {
	case isIdentStart(c):
		l.take(isIdentChar)
		return token{tIdent, l.src[start:l.off], p}
	case isDigit(c) || c == '-' && l.off+1 < len(l.src) && isDigit(l.src[l.off+1]):
		l.off++
		l.col++
		l.take(isNumberChar)
		return token{tNumber, l.src[start:l.off], p}
	case c == '"':
		return l.str(p)
	}
	if two := l.src[l.off:min(l.off+2, len(l.src))]; two == ">=" || two == "<=" || two == "==" || two == "!=" {
		l.off += 2
		l.col += 2
		return token{tCmp, two, p}
	}
	if k, ok := punct[c]; ok {
		l.advance()
		return token{k, l.src[start:l.off], p}
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	l.advance()
	l.errs.add(&Error{Pos: p, Msg: fmt.Sprintf("unexpected character %q", r), Hint: charHints[r]})
	return token{kind: tBad, text: l.src[start:l.off], pos: p}
}

var punct = map[byte]tokKind{':': tColon, ',': tComma, '=': tAssign, '(': tLParen, ')': tRParen, '>': tCmp, '<': tCmp}

// charHints explain the characters people actually type by mistake,
// including the full-width punctuation of a Chinese input method.
var charHints = map[rune]string{
	'!': "write != or not", '%': "write the unit right after the number, as in 5%",
	'\'': `strings use double quotes: "batch_"`, '：': "use an ASCII colon :",
	'，': "use an ASCII comma ,", '“': `use ASCII double quotes "`, '”': `use ASCII double quotes "`,
	'（': "use ASCII parentheses ( )", '）': "use ASCII parentheses ( )",
}

// str reads a double-quoted string. Only \" and \\ are escapes, and a
// string ends on its line, so a missing quote costs one line, not the file.
func (l *lexer) str(p Pos) token {
	l.advance()
	start, ok, escaped := l.off, true, false
	var b strings.Builder
	for {
		if l.off >= len(l.src) || l.src[l.off] == '\n' || l.src[l.off] == '\r' {
			l.errs.add(&Error{Pos: p, Msg: "unterminated string", Expected: `a closing "`, Hint: "a string ends on the line where it starts"})
			return token{kind: tBad, pos: p}
		}
		c, at := l.src[l.off], l.pos()
		switch r, n := utf8.DecodeRuneInString(l.src[l.off:]); {
		case c == '"':
			l.advance()
			if !ok {
				return token{kind: tBad, pos: p}
			}
			if !escaped {
				return token{tString, l.src[start : l.off-1], p}
			}
			b.WriteString(l.src[start : l.off-1])
			return token{tString, b.String(), p}
		case c == '\\':
			l.advance()
			if l.off < len(l.src) && (l.src[l.off] == '"' || l.src[l.off] == '\\') {
				b.WriteString(l.src[start : l.off-1])
				b.WriteByte(l.src[l.off])
				l.advance()
				start, escaped = l.off, true
				continue
			}
			ok = false
			l.errs.add(&Error{Pos: at, Msg: "unknown escape in string", Expected: `\" or \\`})
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0x7f:
			ok = false
			l.errs.add(&Error{Pos: at, Msg: fmt.Sprintf("invalid character %q in string", r), Hint: "strings hold printable UTF-8 text"})
			l.advance()
		default:
			l.advance()
		}
	}
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isLetter(c byte) bool     { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentStart(c byte) bool { return isLetter(c) || c == '_' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) || c == '.' || c == '-' }

// isNumberChar gathers a number with its unit, and any junk glued to it, so
// that "5min" is one token reported as an unknown unit.
func isNumberChar(c byte) bool { return isLetter(c) || isDigit(c) || c == '.' || c == '%' }

// isIdent reports whether s can be written bare: a name, a channel, a
// label key.
func isIdent(s string) bool {
	if s == "" || !isIdentStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isIdentChar(s[i]) {
			return false
		}
	}
	return true
}
