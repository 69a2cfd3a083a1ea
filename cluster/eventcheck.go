package cluster

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// checkEvent checks an event read from the events stream as the HTTP API
// checks one it decodes: Validate's fields, and extra a JSON object of
// valid UTF-8 (httpapi's decoder refuses anything else; null is no
// extra). A node's batches hold what its API checked, but anyone allowed
// to publish on the subjects writes what they like, in a batch or alone
// (json.Unmarshal takes any JSON value, and any bytes, as a raw extra).
// An owner that applied such an extra kept a task whose answer between
// nodes could not be encoded: it was unreadable through every other node
// for as long as it was kept.
func checkEvent(ev *apollo.Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	x := ev.Extra
	switch {
	case len(x) == 0:
	case string(x) == "null":
		ev.Extra = nil
	case x[0] != '{' || !json.Valid(x):
		return &apollo.Error{Code: apollo.EINVALID, Field: "extra", Message: "not a JSON object",
			Hint: "send extra as a JSON object, as docs/protocol.md says, or leave it out"}
	case !utf8.Valid(x):
		return &apollo.Error{Code: apollo.EINVALID, Field: "extra", Message: "not valid UTF-8",
			Hint: "send extra as a JSON object of UTF-8 text"}
	}
	return nil
}
