package expect

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	apollo "github.com/apollo-11/apollo"
)

// Issue is one problem found in a file of jobs or expectations: where it
// is (file, line and column, job and field), what is wrong and what to do
// about it.
type Issue struct {
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
	Col     int    `json:"col,omitempty"`
	Job     string `json:"job,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// Error formats the issue the way compilers do, so editors can jump to it:
// "expect.yaml:12:15: job "backup": grace: ... (hint)".
func (i *Issue) Error() string {
	var b strings.Builder
	if i.File != "" {
		b.WriteString(i.File)
		b.WriteString(":")
	}
	if i.Line > 0 {
		fmt.Fprintf(&b, "%d:", i.Line)
		if i.Col > 0 {
			fmt.Fprintf(&b, "%d:", i.Col)
		}
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if i.Job != "" {
		fmt.Fprintf(&b, "job %q: ", i.Job)
	}
	if i.Field != "" {
		b.WriteString(i.Field)
		b.WriteString(": ")
	}
	b.WriteString(i.Message)
	if i.Hint != "" {
		b.WriteString(" (")
		b.WriteString(i.Hint)
		b.WriteString(")")
	}
	return b.String()
}

// FileError is every problem found in one file, in file order. Parsers
// report all of them at once so that a user fixes a file in one pass.
//
// errors.As finds each *Issue, and also an *apollo.Error with code
// EINVALID, so that an API layer maps a bad file to a 400 without knowing
// which package read it.
type FileError struct {
	// What the file is, for the first line of a message with several
	// issues: "jobs file", "expectations file".
	What   string
	Issues []*Issue
}

// NewFileError returns the issues, put in file order, as one error about
// the file called what. Issues without a position keep their relative
// order at the end.
func NewFileError(what string, issues []*Issue) *FileError {
	sort.SliceStable(issues, func(a, b int) bool {
		x, y := issues[a], issues[b]
		if (x.Line == 0) != (y.Line == 0) {
			return x.Line != 0
		}
		if x.Line != y.Line {
			return x.Line < y.Line
		}
		return x.Col < y.Col
	})
	return &FileError{What: what, Issues: issues}
}

func (e *FileError) Error() string {
	if len(e.Issues) == 1 {
		return e.Issues[0].Error()
	}
	lines := make([]string, 0, len(e.Issues)+1)
	lines = append(lines, fmt.Sprintf("%d problems in the %s:", len(e.Issues), e.What))
	for _, i := range e.Issues {
		lines = append(lines, "  "+i.Error())
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the issues, so errors.As can find an *Issue.
func (e *FileError) Unwrap() []error {
	errs := make([]error, len(e.Issues))
	for n, i := range e.Issues {
		errs[n] = i
	}
	return errs
}

// As lets errors.As see a FileError as an *apollo.Error with code EINVALID.
func (e *FileError) As(target any) bool {
	p, ok := target.(**apollo.Error)
	if !ok {
		return false
	}
	ae := &apollo.Error{Code: apollo.EINVALID, Message: e.Error()}
	if len(e.Issues) > 0 {
		ae.Field = e.Issues[0].Field
		ae.Hint = e.Issues[0].Hint
	}
	*p = ae
	return true
}

// maxScheduleBytes bounds a schedule, so that its messages, which quote
// it and its fields, stay short: a cron expression is a few dozen bytes.
const maxScheduleBytes = 256

// quoteShort quotes a value a problem names, cut to its first 64 bytes:
// a value of megabytes (a pasted file, a hostile body) would otherwise be
// echoed whole in the answer, the CLI and the log.
func quoteShort(s string) string {
	const most = 64
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}
