package apollo

import "fmt"

// Result is what became of one reported event: the answer the API gives
// for each event it is sent (docs/protocol.md, "The answer"). The bus
// decides it (bus.Bus.Publish).
type Result uint8

const (
	// ResultAccepted: durable and applied.
	ResultAccepted Result = iota + 1
	// ResultHeld: durable, but its task's queue is over its limit: slow down.
	ResultHeld
	// ResultDuplicate: its sequence was not above the last one accepted.
	ResultDuplicate
	// ResultRejected: invalid, or an illegal transition. Do not resend.
	ResultRejected
	// ResultRetryLater: not stored (overloaded or stopping). Resend later.
	ResultRetryLater
	// ResultWaiting: durable, but ahead of a missing earlier event of its
	// task and not legal without it. It applies when the missing events
	// arrive, or when the reorder window ends without them (the history
	// then says how many never arrived), unless an event that does arrive
	// makes it illegal for good.
	ResultWaiting
)

var resultNames = [...]string{"", "accepted", "held", "duplicate", "rejected", "retry_later", "waiting"}

// String is the result as the API's answer names it.
func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("Result(%d)", r)
}

// Outcome is the result of one event, with the reason when it was not taken.
type Outcome struct {
	Result Result
	Err    *Error
}
