package httpapi

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// The JSON scanner under the ingest decoder (decode.go): it checks syntax
// and finds values, and knows nothing of events. It reports errors as
// *apollo.Error with byte offsets counted from the start of the body.

// maxDepth bounds how deeply values nest, the batch array and the event
// object included, so that skipping a hostile extra cannot exhaust the
// stack; real events nest three or four levels.
const maxDepth = 64

// kindOf names the JSON type of the value that starts with c.
func kindOf(c byte) string {
	if k := kinds[c]; k != "" {
		return k
	}
	return "number"
}

var kinds = [256]string{'"': "string", '{': "object", '[': "array", 't': "bool", 'f': "bool"}

// unescape appends the content of a valid JSON string (without its quotes)
// to dst with its escapes resolved. A \u escape that is half of a surrogate
// pair without its other half becomes U+FFFD, as in encoding/json, and lone
// reports that one did.
func unescape(dst, s []byte) (out []byte, lone bool) {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...), lone
		}
		dst, s = append(dst, s[:i]...), s[i:]
		if s[1] != 'u' {
			dst, s = append(dst, unescaped[s[1]]), s[2:]
			continue
		}
		r := hex4(s[2:6])
		s = s[6:]
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
				r2 = hex4(s[2:6])
			}
			if r = utf16.DecodeRune(r, r2); r != utf8.RuneError {
				s = s[6:]
			} else {
				lone = true
			}
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst, lone
}

var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		r = r<<4 | rune(hexVal[c])
	}
	return r
}

// scanner walks JSON text in buf and checks its syntax as it goes. Every
// method leaves s.pos after what it read; one that finds a syntax error
// records it in s.err and returns false. Offsets in errors count from the
// start of the body: buf starts at base.
type scanner struct {
	buf   []byte
	pos   int
	base  int64
	depth int
	err   *apollo.Error
}

// ws skips JSON whitespace and returns the new position.
func (s *scanner) ws() int {
	for s.pos < len(s.buf) && isSpace(s.buf[s.pos]) {
		s.pos++
	}
	return s.pos
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// fail records a syntax error at s.pos. When the input ended early it
// points at its last byte, as encoding/json did.
func (s *scanner) fail(expected string) bool {
	at, found := s.pos, "the end of the input"
	if at < len(s.buf) {
		found = describe(s.buf[at])
	} else {
		at = max(len(s.buf)-1, 0)
	}
	return s.failAt(at, "malformed JSON: "+found+" where "+expected+" belongs")
}

func (s *scanner) failAt(at int, msg string) bool {
	off := s.base + int64(at)
	s.err = &apollo.Error{Code: apollo.EINVALID, Offset: off, Message: msg,
		Hint: fmt.Sprintf("the problem is at byte %d of the body (counting from 0)", off)}
	return false
}

func describe(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// open enters the object or array at s.pos and reports whether a member
// follows; end is its closing byte.
func (s *scanner) open(end byte) (more, ok bool) {
	if s.depth++; s.depth > maxDepth {
		return false, s.failAt(s.pos, fmt.Sprintf("JSON nested more than %d levels deep", maxDepth))
	}
	s.pos++
	if s.ws() < len(s.buf) && s.buf[s.pos] == end {
		s.pos++
		s.depth--
		return false, true
	}
	return true, true
}

// next moves past the ',' or the closing byte after a member.
func (s *scanner) next(end byte) (more, ok bool) {
	if s.ws() < len(s.buf) {
		switch s.buf[s.pos] {
		case ',':
			s.pos++
			s.ws()
			return true, true
		case end:
			s.pos++
			s.depth--
			return false, true
		}
	}
	if end == '}' {
		return false, s.fail("',' or '}'")
	}
	return false, s.fail("',' or ']'")
}

// key reads an object member's key and the ':' after it.
func (s *scanner) key() (key []byte, esc, ok bool) {
	if s.pos >= len(s.buf) || s.buf[s.pos] != '"' {
		return nil, false, s.fail("an object key")
	}
	start, end := s.pos+1, plainRun(s.buf, s.pos+1)
	if end < len(s.buf) && s.buf[end] == '"' {
		s.pos = end + 1 // the usual key: no escapes, no need for str
	} else if start, end, esc, ok = s.str(); !ok {
		return nil, false, false
	}
	if s.ws() >= len(s.buf) || s.buf[s.pos] != ':' {
		return nil, false, s.fail("':'")
	}
	s.pos++
	s.ws()
	return s.buf[start:end], esc, true
}

// skip moves past one value of any kind.
func (s *scanner) skip() bool {
	if s.pos >= len(s.buf) {
		return s.fail("a value")
	}
	switch c := s.buf[s.pos]; c {
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		more, ok := s.open(end)
		for ok && more {
			if c == '{' {
				_, _, ok = s.key()
			}
			if ok = ok && s.skip(); ok {
				more, ok = s.next(end)
			}
		}
		return ok
	case '"':
		_, _, _, ok := s.str()
		return ok
	case 't':
		return s.lit("true")
	case 'f':
		return s.lit("false")
	case 'n':
		return s.lit("null")
	}
	_, _, ok := s.num()
	return ok
}

func (s *scanner) lit(word string) bool {
	for i := range len(word) {
		if s.pos >= len(s.buf) || s.buf[s.pos] != word[i] {
			return s.fail(word)
		}
		s.pos++
	}
	return true
}

// str moves past the string at s.pos and says where its content lies and
// whether it holds escapes. Bytes of 0x80 and up pass unchecked, as in
// encoding/json's scanner: the fields that keep them check UTF-8 later.
func (s *scanner) str() (start, end int, esc, ok bool) {
	start = s.pos + 1
	i := start
	for {
		i = plainRun(s.buf, i)
		s.pos = i
		switch {
		case i >= len(s.buf):
			return 0, 0, false, s.fail(`'"'`)
		case s.buf[i] == '"':
			s.pos = i + 1
			return start, i, esc, true
		case s.buf[i] != '\\':
			return 0, 0, false, s.fail("a string character (escape control characters)")
		}
		esc = true
		if i, ok = s.escape(i + 1); !ok {
			return 0, 0, false, false
		}
	}
}

// plainRun returns the index of the first byte from i on that a string
// cannot hold as it is ('"', '\\' or a control character), or len(buf).
// Strings are most of an event's bytes, so it looks at 8 bytes at a time:
// for each test, the lowest byte that a SWAR "has byte" formula flags is
// exact (false flags only appear above a true one).
func plainRun(buf []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(buf); i += 8 {
		w := binary.LittleEndian.Uint64(buf[i:])
		q, b := w^(ones*'"'), w^(ones*'\\')
		if m := ((q-ones)&^q | (b-ones)&^b | (w-ones*0x20)&^w) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for i < len(buf) && plain[buf[i]] {
		i++
	}
	return i
}

// escape checks the escape whose letter is at i and returns the index after it.
func (s *scanner) escape(i int) (int, bool) {
	s.pos = i
	if i < len(s.buf) && s.buf[i] != 'u' && unescaped[s.buf[i]] != 0 {
		return i + 1, true
	}
	if i >= len(s.buf) || s.buf[i] != 'u' {
		return 0, s.fail(`an escape letter (one of "\/bfnrtu)`)
	}
	for s.pos = i + 1; s.pos < i+5; s.pos++ {
		if s.pos >= len(s.buf) || hexVal[s.buf[s.pos]] > 15 {
			return 0, s.fail("a hex digit")
		}
	}
	return s.pos, true
}

// num moves past the number at s.pos. isInt reports whether it is an
// integer (no fraction, no exponent) within int64, and n is then its value.
func (s *scanner) num() (n int64, isInt, ok bool) {
	buf, i := s.buf, s.pos
	neg := buf[i] == '-'
	if neg {
		i++
	}
	start := i
	var u uint64
	if i < len(buf) && buf[i] == '0' {
		i++
	} else if i < len(buf) && isDigit(buf[i]) {
		for ; i < len(buf) && isDigit(buf[i]); i++ {
			u = u*10 + uint64(buf[i]-'0') // wraps past 19 digits, which isInt refuses
		}
	} else {
		s.pos = i
		return 0, false, s.fail("a digit")
	}
	isInt = i-start <= 19 && (u <= math.MaxInt64 || neg && u == 1<<63)
	if i < len(buf) && buf[i] == '.' {
		if i, ok = s.digits(i + 1); !ok {
			return 0, false, false
		}
		isInt = false
	}
	if i < len(buf) && (buf[i] == 'e' || buf[i] == 'E') {
		i++
		if i < len(buf) && (buf[i] == '+' || buf[i] == '-') {
			i++
		}
		if i, ok = s.digits(i); !ok {
			return 0, false, false
		}
		isInt = false
	}
	s.pos = i
	if neg {
		return -int64(u), isInt, true // -(1<<63) wraps to itself: math.MinInt64
	}
	return int64(u), isInt, true
}

// digits moves past one or more digits from i.
func (s *scanner) digits(i int) (int, bool) {
	if i >= len(s.buf) || !isDigit(s.buf[i]) {
		s.pos = i
		return 0, s.fail("a digit")
	}
	for i < len(s.buf) && isDigit(s.buf[i]) {
		i++
	}
	return i, true
}

// plain marks the bytes a string holds as they are: not the quote, not the
// backslash, not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// hexVal maps hex digits to their value and every other byte to 0xff.
var hexVal = func() (t [256]byte) {
	for c := range t {
		t[c] = 0xff
	}
	for c := byte(0); c < 10; c++ {
		t['0'+c] = c
	}
	for c := byte(0); c < 6; c++ {
		t['a'+c], t['A'+c] = 10+c, 10+c
	}
	return t
}()

// clip shortens what an error message quotes from the body, which may be
// megabytes long.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// validUTF8 is utf8.Valid with a cheaper way out for the short ASCII
// strings that events are made of.
func validUTF8(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return utf8.Valid(b)
		}
	}
	return true
}
