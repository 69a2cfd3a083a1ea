package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// writeError answers with the error's status and body. Internal errors are
// logged and hidden behind a generic message.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *apollo.Error
	if !errors.As(err, &e) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = internalError()
	}
	status := apiclient.StatusOf(e.Code)
	if (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, apiclient.ErrorBody{Error: e})
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
