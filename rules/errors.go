package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// Pos is a place in a rules file. Line and Col count from 1; Col counts
// characters rather than bytes so that it matches what an editor shows for
// job prefixes written in Chinese. The zero Pos means "unknown".
type Pos struct {
	File      string
	Line, Col int
}

// IsValid reports whether p names a place.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String returns "file:line:col", "line:col" without a file, or the file
// alone when the place is unknown.
func (p Pos) String() string {
	if !p.IsValid() {
		return p.File
	}
	if p.File == "" {
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is one problem in a rules file: where, what was found, what was
// expected there, and a hint on how to fix it.
type Error struct {
	Pos      Pos
	Msg      string
	Expected string
	Hint     string
}

// Error formats the problem as "file:line:col: msg (expected X); hint".
func (e *Error) Error() string {
	var b strings.Builder
	if p := e.Pos.String(); p != "" {
		b.WriteString(p)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Expected != "" {
		b.WriteString(" (expected ")
		b.WriteString(e.Expected)
		b.WriteString(")")
	}
	if e.Hint != "" {
		b.WriteString("; ")
		b.WriteString(e.Hint)
	}
	return b.String()
}

// Unwrap presents the problem as an *apollo.Error with code EINVALID, so
// that apollo.ErrorCode and the HTTP layer classify rule errors as bad
// input without knowing this package.
func (e *Error) Unwrap() error {
	msg := e.Msg
	if e.Expected != "" {
		msg += " (expected " + e.Expected + ")"
	}
	return &apollo.Error{Code: apollo.EINVALID, Field: e.Pos.String(), Message: msg, Hint: e.Hint}
}

// ErrorList is every problem found in one file, in file order.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find an *Error (or, through it, an *apollo.Error).
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// maxErrors bounds one report: past it the rest is usually noise from the
// first few mistakes.
const maxErrors = 20

// errs collects the problems of one parse.
type errs struct {
	list ErrorList
	// saved: the text was accepted before (ParseSaved), so bounds added
	// since are not applied to it.
	saved bool
}

func (e *errs) add(err *Error) {
	if len(e.list) < maxErrors {
		e.list = append(e.list, err)
	}
}

func (e *errs) n() int     { return len(e.list) }
func (e *errs) full() bool { return len(e.list) >= maxErrors }
func (e *errs) err() error {
	if len(e.list) == 0 {
		return nil
	}
	slices.SortStableFunc(e.list, func(a, b *Error) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	return e.list
}

// suggest returns "did you mean X?" for the candidate nearest to word by
// edit distance, ignoring case, or "" when nothing is close enough to help.
func suggest(word string, candidates ...string) string {
	word = strings.ToLower(word)
	best, limit := "", max(1, len(word)/3)
	for _, c := range candidates {
		if d := editDistance(word, strings.ToLower(c)); d <= limit {
			best, limit = c, d-1
		}
	}
	if best == "" {
		return ""
	}
	return "did you mean " + best + "?"
}

// editDistance is the Levenshtein distance between a and b, by bytes; rule
// vocabulary is ASCII.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30 // nobody mistypes a 64-byte keyword; bounds the work
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// maxQuoted is how much of a name, string or word a problem quotes.
const maxQuoted = 64

// clip quotes s for a problem, as %q does, up to maxQuoted bytes and
// then its length: every part of a rules file may be as long as the
// body, and a problem that quoted a 1 MB name whole came back in as long
// an answer, and a log line as long when the file was refused on reload.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cutAt(s)]) + fmt.Sprintf("… (%d bytes)", len(s))
}

// clipWord is clip for a word quoted as itself (a number: 5x).
func clipWord(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	return s[:cutAt(s)] + fmt.Sprintf("… (%d bytes)", len(s))
}

// cutAt is where clip cuts s: at maxQuoted bytes, back to a rune's start.
func cutAt(s string) int {
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}
