package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/apollo-11/apollo"
)

// statusOf maps error codes to HTTP statuses: the only place that does.
var statusOf = map[string]int{
	apollo.EINVALID:      http.StatusBadRequest,
	apollo.ENOTFOUND:     http.StatusNotFound,
	apollo.ECONFLICT:     http.StatusConflict,
	apollo.EUNAUTHORIZED: http.StatusUnauthorized,
	apollo.EFORBIDDEN:    http.StatusForbidden,
	apollo.ETOOMANY:      http.StatusTooManyRequests,
	apollo.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	apollo.EUNSUPPORTED:  http.StatusUnsupportedMediaType,
	apollo.EUNAVAILABLE:  http.StatusServiceUnavailable,
	apollo.EINTERNAL:     http.StatusInternalServerError,
}

type errorBody struct {
	Error *apollo.Error `json:"error"`
}

// writeError answers with the error's status and body. Internal errors are
// logged and hidden behind a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apollo.Error
	if !errors.As(err, &e) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = internalError()
	}
	status := statusOf[e.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: e})
}

// apiError returns the *apollo.Error in err's chain, or an internal error
// for any other: a type assertion would panic the day a callee wraps its
// error.
func apiError(err error) *apollo.Error {
	var e *apollo.Error
	if errors.As(err, &e) {
		return e
	}
	return internalError()
}

// internalError is all a user sees of an error that is not an *apollo.Error.
func internalError() *apollo.Error {
	return &apollo.Error{Code: apollo.EINTERNAL, Message: "internal error", Hint: "the server log has the details"}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// discardLogger is used when Options.Logger is nil in tests.
var discardLogger = slog.New(slog.DiscardHandler)
