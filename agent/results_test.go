package agent

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// The answer shown in docs/protocol.md.
const protocolAnswer = `{
  "results": [
    {"result": "accepted"},
    {"result": "duplicate"},
    {"result": "rejected", "error": {"code": "invalid", "field": "sequence", "message": "0 is below 1", "hint": "number each task's events 1, 2, 3, ..."}},
    {"result": "retry_later"},
    {"result": "waiting"}
  ],
  "accepted": 1, "duplicate": 1, "rejected": 1, "retryLater": 1, "held": 0, "waiting": 1
}`

func TestDecodeResults(t *testing.T) {
	t.Parallel()
	var r response
	if err := decodeResults([]byte(protocolAnswer), &r); err != nil {
		t.Fatal(err)
	}
	want := response{
		Results: []result{
			{Result: outcomeAccepted},
			{Result: outcomeDuplicate},
			{Result: outcomeRejected, Error: &apollo.Error{Code: "invalid", Field: "sequence", Message: "0 is below 1", Hint: "number each task's events 1, 2, 3, ..."}},
			{Result: outcomeRetryLater},
			{Result: outcomeWaiting},
		},
		Accepted: 1, Duplicate: 1, Rejected: 1, RetryLater: 1, Waiting: 1,
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got %+v\nwant %+v", r, want)
	}
	// Reusing the value must not leak the earlier answer into the next.
	if err := decodeResults([]byte(`{"results":[{"result":"held"},{"result":"future_word"}],"slowDown":true}`), &r); err != nil {
		t.Fatal(err)
	}
	want = response{Results: []result{{Result: outcomeHeld}, {Result: outcomeUnknown}}, SlowDown: true}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("reused: got %+v\nwant %+v", r, want)
	}
	for _, bad := range []string{"", "[", `{"results":{}}`, `{"results":[{"result":1}]}`, "<html>"} {
		if err := decodeResults([]byte(bad), &r); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

// FuzzDecodeResults feeds arbitrary bytes to the answer decoder: it must not
// panic; what it decodes must survive an encode/decode round trip; and
// decoding into a reused value must give what decoding into a fresh one
// gives.
func FuzzDecodeResults(f *testing.F) {
	for _, seed := range []string{
		protocolAnswer,
		`{"results":[{"result":"held"}],"held":1,"slowDown":true}`,
		`{"error":{"code":"too_large","message":"body over 4194304 bytes"}}`,
		`{"error":{"code":"invalid","message":"bad JSON","offset":12}}`,
		`{"results":[{"result":"accepted"},{"result":"mystery"},null,{}]}`,
		`{"results":[]}`, `{}`, `null`, `[]`, ``, `{"results":[{"result":"\u0061ccepted"}]}`,
		"{\"results\":[{\"result\":\"accepted\",\"error\":{\"message\":\"\xff\"}}]}",
	} {
		f.Add([]byte(seed))
	}
	junk := func() response {
		return response{Results: []result{{Result: outcomeRejected, Error: &apollo.Error{Code: "x"}}, {Result: outcomeHeld}},
			Accepted: 9, SlowDown: true, Error: &apollo.Error{Message: "old"}}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fresh response
		err := decodeResults(body, &fresh)
		reused := junk()
		errReused := decodeResults(body, &reused)
		if (err == nil) != (errReused == nil) {
			t.Fatalf("fresh: %v, reused: %v", err, errReused)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(normalized(fresh), normalized(reused)) {
			t.Fatalf("reused value decoded differently:\n%+v\n%+v", fresh, reused)
		}
		b, err := json.Marshal(&fresh)
		if err != nil {
			t.Fatalf("encode %+v: %v", fresh, err)
		}
		var back response
		if err := decodeResults(b, &back); err != nil {
			t.Fatalf("decode of %s: %v", b, err)
		}
		if !reflect.DeepEqual(normalized(fresh), normalized(back)) {
			t.Fatalf("round trip changed the answer:\n%+v\n%+v\n%s", fresh, back, b)
		}
	})
}

// normalized treats an empty results list like none: the encoder leaves
// both out.
func normalized(r response) response {
	if len(r.Results) == 0 {
		r.Results = nil
	}
	return r
}

// FuzzRetryAfter: whatever the header holds, the wait is between 0 and
// maxRetryAfter; a whole number of seconds is that wait, capped. (10^10
// seconds overflowed time.Duration into a negative wait: an immediate
// retry where the server asked for the longest pause.)
func FuzzRetryAfter(f *testing.F) {
	for _, h := range []string{"", "0", "1", "3", "-2", "1.5", "100000", "10000000000", "99999999999999999999", "+5", "Wed, 21 Oct 2015 07:28:00 GMT"} {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got := retryAfter(h)
		if got < 0 || got > maxRetryAfter {
			t.Fatalf("retryAfter(%q) = %v, outside [0, %v]", h, got, maxRetryAfter)
		}
		digits := h != "" && strings.Trim(h, "0123456789") == ""
		if !digits {
			return
		}
		want := maxRetryAfter
		if n, err := strconv.ParseUint(h, 10, 64); err == nil && n < uint64(maxRetryAfter/time.Second) {
			want = time.Duration(n) * time.Second
		}
		if got != want {
			t.Fatalf("retryAfter(%q) = %v, want %v", h, got, want)
		}
	})
}
