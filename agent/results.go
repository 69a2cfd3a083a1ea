package agent

import (
	"encoding/json"
	"fmt"

	"github.com/apollo-11/apollo"
)

// outcome is the server's answer for one event (docs/protocol.md, "The
// answer"). Decoding it as a small enum instead of a string keeps the
// response path free of one allocation per event.
type outcome uint8

const (
	outcomeUnknown outcome = iota // a word this SDK does not know: resent, which is safe
	outcomeAccepted
	outcomeHeld
	outcomeDuplicate
	outcomeRejected
	outcomeRetryLater
	outcomeWaiting // stored, ahead of a missing earlier event: nothing to resend
)

var outcomeNames = [...]string{"", "accepted", "held", "duplicate", "rejected", "retry_later", "waiting"}

func (o outcome) String() string {
	if int(o) < len(outcomeNames) && o != outcomeUnknown {
		return outcomeNames[o]
	}
	return "unknown"
}

// MarshalText implements encoding.TextMarshaler; unknown encodes as "".
func (o outcome) MarshalText() ([]byte, error) {
	if int(o) < len(outcomeNames) {
		return []byte(outcomeNames[o]), nil
	}
	return nil, fmt.Errorf("agent: cannot encode outcome %d", o)
}

// UnmarshalText implements encoding.TextUnmarshaler. A word it does not know
// becomes outcomeUnknown rather than an error, so that a newer server's
// answer does not fail the whole batch.
func (o *outcome) UnmarshalText(b []byte) error {
	*o = outcomeUnknown
	for i, n := range outcomeNames {
		if i > 0 && n == string(b) {
			*o = outcome(i)
			break
		}
	}
	return nil
}

// result is one element of "results".
type result struct {
	Result outcome       `json:"result"`
	Error  *apollo.Error `json:"error,omitempty"`
}

// response is the body of an answer to POST /api/v1/events: the per-event
// results with their tallies, or an error for the request as a whole.
type response struct {
	Results    []result      `json:"results,omitempty"`
	Accepted   int           `json:"accepted,omitempty"`
	Duplicate  int           `json:"duplicate,omitempty"`
	Rejected   int           `json:"rejected,omitempty"`
	RetryLater int           `json:"retryLater,omitempty"`
	Held       int           `json:"held,omitempty"`
	Waiting    int           `json:"waiting,omitempty"`
	SlowDown   bool          `json:"slowDown,omitempty"`
	Error      *apollo.Error `json:"error,omitempty"`
}

// decodeResults parses an answer body into r, reusing r's results slice.
// It checks the shape only; whether the results match the request is the
// caller's business.
func decodeResults(body []byte, r *response) error {
	// encoding/json decodes into reused elements without zeroing them
	// first, so clear what an earlier answer left.
	results := r.Results[:cap(r.Results)]
	clear(results)
	*r = response{Results: results[:0]}
	if err := json.Unmarshal(body, r); err != nil {
		return fmt.Errorf("agent: decode answer: %w", err)
	}
	return nil
}
