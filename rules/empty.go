package rules

import "bytes"

// EmptyMarker is the comment line that says a rules file (or a
// PUT /api/v1/rules body) without rules is meant to be so: it removes
// every rule that runs (docs/rules.md). Without it, a file with no rules
// that would replace running ones is refused, because an editor that
// truncates before it writes, or a client that sent nothing, looks just
// like it.
const EmptyMarker = "# apollo: empty"

// SaysEmpty reports whether a source without rules says so on purpose: a
// line that is EmptyMarker, or the JSON form, which a program writes
// whole (a truncated file is text: nothing at all).
func SaysEmpty(src []byte) bool {
	if t := bytes.TrimSpace(src); len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return true
	}
	for line := range bytes.Lines(src) {
		if string(bytes.TrimSpace(line)) == EmptyMarker {
			return true
		}
	}
	return false
}
