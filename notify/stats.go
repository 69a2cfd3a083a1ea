package notify

import "sync/atomic"

// ChannelStats counts what happened on one channel since the dispatcher was
// made. Queued counts notifications accepted into the queue; the others
// count Attempt outcomes, so Sent counts messages (a digest is one).
type ChannelStats struct {
	Queued    int64 `json:"queued"`
	Sent      int64 `json:"sent"`
	Failed    int64 `json:"failed"`
	Retried   int64 `json:"retried"`
	GaveUp    int64 `json:"gaveUp"`
	Dropped   int64 `json:"dropped"`
	Coalesced int64 `json:"coalesced"`
	// QueueLen is how many notifications wait in the queue right now.
	QueueLen int `json:"queueLen"`
}

// Stats is the delivery counters of every channel, by name.
type Stats struct {
	Channels map[string]ChannelStats `json:"channels"`
	// UnknownChannel counts notifications dropped because they named a
	// channel that is not configured.
	UnknownChannel int64 `json:"unknownChannel"`
	// OutboxFailures counts the outbox's refusals: notifications sent
	// without being recorded first (a crash before they leave loses
	// them), and deliveries not recorded (a restart may send them again).
	OutboxFailures int64 `json:"outboxFailures"`
}

type counters struct {
	queued, sent, failed, retried, gaveUp, dropped, coalesced atomic.Int64
}

// count adds one to the counter of an outcome.
func (c *counters) count(outcome string) {
	switch outcome {
	case OutcomeSent:
		c.sent.Add(1)
	case OutcomeFailed:
		c.failed.Add(1)
	case OutcomeRetrying:
		c.retried.Add(1)
	case OutcomeGaveUp:
		c.gaveUp.Add(1)
	case OutcomeDropped:
		c.dropped.Add(1)
	case OutcomeCoalesced:
		c.coalesced.Add(1)
	}
}

func (c *counters) snapshot() ChannelStats {
	return ChannelStats{
		Queued: c.queued.Load(), Sent: c.sent.Load(), Failed: c.failed.Load(),
		Retried: c.retried.Load(), GaveUp: c.gaveUp.Load(), Dropped: c.dropped.Load(),
		Coalesced: c.coalesced.Load(),
	}
}
