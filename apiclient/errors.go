package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/apollo-11/apollo"
)

// codeStatus is the one table between error codes and HTTP statuses. The
// server answers an error with its code's status (StatusOf); a client
// reads a status back to its code when the answer carries none, as behind
// a proxy (CodeOf).
var codeStatus = []struct {
	code   string
	status int
}{
	{apollo.EINVALID, http.StatusBadRequest},
	{apollo.ENOTFOUND, http.StatusNotFound},
	{apollo.ECONFLICT, http.StatusConflict},
	{apollo.EPRECONDITION, http.StatusPreconditionFailed},
	{apollo.EUNAUTHORIZED, http.StatusUnauthorized},
	{apollo.EFORBIDDEN, http.StatusForbidden},
	{apollo.ETOOMANY, http.StatusTooManyRequests},
	{apollo.ETOOLARGE, http.StatusRequestEntityTooLarge},
	{apollo.EUNSUPPORTED, http.StatusUnsupportedMediaType},
	{apollo.EUNAVAILABLE, http.StatusServiceUnavailable},
	{apollo.EINTERNAL, http.StatusInternalServerError},
}

// StatusOf is the HTTP status of an error code; 500 for a code not in the
// table.
func StatusOf(code string) int {
	for _, e := range codeStatus {
		if e.code == code {
			return e.status
		}
	}
	return http.StatusInternalServerError
}

// CodeOf is the error code of an HTTP status; EINTERNAL for a status not in
// the table.
func CodeOf(status int) string {
	for _, e := range codeStatus {
		if e.status == status {
			return e.code
		}
	}
	return apollo.EINTERNAL
}

// ErrorBody is every error answer: the error, and for a refused rules
// file (PUT /api/v1/rules) each problem with its place.
type ErrorBody struct {
	Error  *apollo.Error `json:"error"`
	Errors []RuleProblem `json:"errors,omitempty"`
	// Total is the number of problems when Errors lists only the first
	// of them (a file with more than the server lists).
	Total int `json:"total,omitempty"`
}

// ErrNoRoute matches (errors.Is) the error for a route the server does not
// serve at all: an older server, or another program on that port.
var ErrNoRoute = errors.New("route not served")

// Error is an error answer of the server. It unwraps to the server's
// *apollo.Error (or, for an answer that is not the API's, one made from
// the status), so apollo.ErrorCode and errors.As read it like any error of
// the domain.
type Error struct {
	Method, Path string
	Status       int
	Err          *apollo.Error
	// Problems are the places of the problems in a refused rules file.
	Problems []RuleProblem
	// TotalProblems is how many problems the file has, when the server
	// listed only the first of them in Problems (0: it listed all).
	TotalProblems int
	noRoute       bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether e is the answer of a route the server lacks.
func (e *Error) Is(target error) bool { return target == ErrNoRoute && e.noRoute }

// UnreachableError is a request that got no answer: the server is down,
// the address wrong, or the network in between.
type UnreachableError struct {
	Server string // the base URL
	Err    error  // what the connection said
}

func (e *UnreachableError) Error() string { return "cannot reach " + e.Server + ": " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// answerError reads the error answer of a request: the API's error body
// when there is one, else an error made from the status.
func answerError(base, method, path string, resp *http.Response, raw []byte) *Error {
	e := &Error{Method: method, Path: path, Status: resp.StatusCode}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" {
		var body ErrorBody
		if json.Unmarshal(raw, &body) != nil {
			// The problems in a form this client does not read: the error
			// alone still says what was wrong.
			body = ErrorBody{}
			var only struct {
				Error *apollo.Error `json:"error"`
			}
			if json.Unmarshal(raw, &only) == nil {
				body.Error = only.Error
			}
		}
		if body.Error != nil {
			e.Err, e.Problems, e.TotalProblems = body.Error, body.Errors, body.Total
			if e.Err.Code == "" {
				e.Err.Code = CodeOf(resp.StatusCode)
			}
			if e.Err.Message == "" {
				e.Err.Message = fmt.Sprintf("%s %s: the server answered %s", method, path, resp.Status)
			}
			return e
		}
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		// The API answers every error of its own in JSON: a plain one
		// means the route is not there at all.
		e.noRoute = true
		e.Err = &apollo.Error{Code: apollo.ENOTFOUND,
			Message: fmt.Sprintf("%s %s: the server answered %s: the server at %s does not serve %s %s", method, path, resp.Status, base, method, path),
			Hint:    "it may be an older version of Apollo-11, or another program"}
		return e
	}
	msg := fmt.Sprintf("%s %s: the server answered %s", method, path, resp.Status)
	if text := strings.TrimSpace(string(raw)); text != "" {
		if len(text) > 200 {
			text = strings.ToValidUTF8(text[:200], "") + "…"
		}
		msg += ": " + text
	}
	e.Err = &apollo.Error{Code: CodeOf(resp.StatusCode), Message: msg}
	return e
}
