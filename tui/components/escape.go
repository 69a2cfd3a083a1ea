package components

import "github.com/apollo-11/apollo/internal/termtext"

// Escape makes text from the server safe to print on a terminal
// (termtext.Escape): the screens escape every value a reporter chose.
func Escape(s string) string { return termtext.Escape(s) }

// EscapeLines is Escape for text of several lines: the newlines stay
// (termtext.EscapeLines).
func EscapeLines(s string) string { return termtext.EscapeLines(s) }
