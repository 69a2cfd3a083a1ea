package apollo

import (
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in one table (apiclient.StatusOf
// and CodeOf), which the server answers with and its clients read back.
const (
	EINVALID      = "invalid"             // the request or input is malformed or breaks a rule
	ENOTFOUND     = "not_found"           // the thing asked for does not exist (for this tenant)
	ECONFLICT     = "conflict"            // the request contradicts the current state
	EPRECONDITION = "precondition_failed" // the request was made from a version of a thing that is no longer the current one (If-Match)
	EUNAUTHORIZED = "unauthorized"        // no or bad credentials
	EFORBIDDEN    = "forbidden"           // credentials lack the role
	ETOOMANY      = "too_many"            // slow down and retry later
	ETOOLARGE     = "too_large"           // a body or field is over its limit
	EUNSUPPORTED  = "unsupported"         // unknown content type or encoding
	EUNAVAILABLE  = "unavailable"         // shutting down or a dependency is down
	EINTERNAL     = "internal"            // a bug or an I/O failure; logged
)

// Error is the error type every layer returns for conditions a user can act
// on. Message says what was wrong, Field (or Offset) where, Hint what to do.
// Errors of any other type are internal: they are logged, and the user sees
// a generic message.
type Error struct {
	Code    string `json:"code"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
	// Offset is the byte offset in a request body, when that is the "where".
	Offset int64 `json:"offset,omitempty"`
}

func (e *Error) Error() string {
	s := e.Message
	if e.Field != "" {
		s = e.Field + ": " + s
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or EINTERNAL
// for any other non-nil error, or "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message a user may see: the *Error's text, or a
// generic line for internal errors so that nothing private leaks.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return "internal error"
}
