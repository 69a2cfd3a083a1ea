package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// What a client sent comes back in error answers, to say what was wrong;
// a query value, a header or a path segment may be as long as the
// server's header limit (64 KiB; 1 MiB for net/http's default) and hold
// anything. Before, GET /api/v1/metrics?window=<64 KiB> answered the
// 64 KiB back, and a value with an escape sequence reached a terminal
// that printed the answer. So an error quotes a value through quoteInput,
// and the routes refuse a name or ID longer than any can be before the
// packages behind them quote it.

// maxExcerpt is how much of a value an error answer quotes: enough to
// recognise it, as a job name's start or a typo in a duration.
const maxExcerpt = 64

// quoteInput quotes a value the client sent for an error message: as a Go
// string, with control characters, bidi controls and invalid UTF-8
// escaped, and when it is longer than maxExcerpt bytes, only its start
// (cut at a character) followed by its length.
func quoteInput(s string) string {
	if len(s) <= maxExcerpt {
		return strconv.Quote(s)
	}
	n := maxExcerpt
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return strconv.Quote(s[:n]) + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// boundedPath returns the path value key, refused (field, 400) when it is
// longer than limit bytes: no task, job, alert, silence or channel has such
// a name, and the packages that look it up would quote it whole in their
// "no such" answer.
func boundedPath(r *http.Request, key, field string, limit int) (string, error) {
	return bounded(r.PathValue(key), field, limit)
}

// boundedQuery is boundedPath for a query parameter.
func boundedQuery(r *http.Request, key string, limit int) (string, error) {
	return bounded(r.URL.Query().Get(key), key, limit)
}

func bounded(v, field string, limit int) (string, error) {
	if len(v) > limit {
		return "", &apollo.Error{Code: apollo.EINVALID, Field: field,
			Message: fmt.Sprintf("%s is over the limit of %d bytes: nothing here has a longer %s", quoteInput(v), limit, field),
			Hint:    "give the name or ID as the server lists it"}
	}
	return v, nil
}

// maxIDBytes bounds the ID of an alert or a silence in a path: the
// engine makes them of 16 hex digits; the margin lets that change.
const maxIDBytes = 256
