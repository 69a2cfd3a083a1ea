package notify

import (
	"context"

	apollo "github.com/apollo-11/apollo"
)

// KindDigest is the kind of the message a rate-limited lane sends instead of
// the notifications that waited for a token: one message, "N notifications",
// listing them. It is a delivery kind, not one the alert engine emits.
const KindDigest apollo.NotificationKind = "digest"

// DigestBacklog is the DedupKey of a digest of what waited while its
// channel was down, rather than for the rate limit: the notifications
// queued while the lane retried, folded once the channel answers again,
// or what a process that stopped owed, folded after the restart
// (channels that people read only). Templates see it as .Backlog.
const DigestBacklog = "backlog"

// Message is what a channel sends: a notification rendered by the channel's
// templates in the channel's language.
type Message struct {
	Notification apollo.Notification
	Title        string // one line
	Text         string // plain text body
	Markdown     string // markdown body; the channel adapts it to its flavour
	HTML         string // for email; safe to embed as is

	// Digest, set only when Notification.Kind is KindDigest, holds the
	// messages the digest stands for, oldest first.
	Digest []*Message
}

// Notifier sends one message to one destination. It reports whether a
// failure is worth retrying (a timeout, a 5xx, "slow down") or not (a bad
// token, a rejected payload). Implementations are safe for concurrent use
// and return errors that carry no secret.
type Notifier interface {
	Notify(ctx context.Context, m *Message) (retryable bool, err error)
}

// DigestCarrier is a Notifier whose receiver must learn of every
// notification a digest stands for (a machine: a webhook's incident tool
// or ticket system), and whose digest carries only so many in one
// message. A lane that folds notifications (under a rate limit) into a
// digest for it sends the first that CarriesInDigest takes and leaves the
// rest, ahead of their tenants' queues, for its next turn; a channel read
// by people lists the first and counts the rest instead.
type DigestCarrier interface {
	Notifier
	// CarriesInDigest says how many of items, from the first, one digest
	// message carries in full: at least 1, at most len(items).
	CarriesInDigest(items []*Message) int
	// Fits says whether m, a digest, makes a message its receiver takes
	// (a body within its size limit): a lane cuts a digest that does not
	// fit to the most that does, and leaves the rest for its next turn.
	Fits(m *Message) bool
}

// NotifierFunc adapts a function to Notifier.
type NotifierFunc func(ctx context.Context, m *Message) (bool, error)

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, m *Message) (bool, error) { return f(ctx, m) }

var _ Notifier = NotifierFunc(nil)
