package httpapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/apollo-11/apollo"
)

// apiError replaces the type assertions err.(*apollo.Error) that panicked
// on a wrapped error (issue 15.11): it finds the error in the chain, and
// turns anything else into an internal error instead of a panic.
func TestAPIError(t *testing.T) {
	t.Parallel()
	inner := &apollo.Error{Code: apollo.EFORBIDDEN, Field: "name", Message: "not yours"}
	if got := apiError(fmt.Errorf("checking: %w", inner)); got != inner {
		t.Errorf("wrapped: %+v, want the inner error", got)
	}
	if got := apiError(inner); got != inner {
		t.Errorf("bare: %+v", got)
	}
	if got := apiError(errors.New("disk on fire")); got.Code != apollo.EINTERNAL || got.Message != "internal error" {
		t.Errorf("plain error: %+v, want an internal error that says nothing private", got)
	}
}
