package alert

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/rules"
)

// MetricsReader is what the engine reads from a metrics store
// (metrics.Store has it): every job of a tenant over one window.
type MetricsReader interface {
	Table(ctx context.Context, q metrics.Query) (*metrics.Table, error)
}

// MultiReader is a MetricsReader that reads several windows of one tenant
// at one moment in one pass (metrics.Aggregator has it); the engine uses
// it when the store has it.
type MultiReader interface {
	Tables(ctx context.Context, qs []metrics.Query) ([]*metrics.Table, error)
}

// Sender takes notifications for delivery. Send must return at once
// (notify.Dispatcher queues); the engine calls it outside its locks.
type Sender interface {
	Send(n apollo.Notification)
}

// Holder says which jobs' trouble holds the alerts of a job (job
// expectations: its upstream jobs that are down, or the job itself while
// it flaps). The engine asks it before it notifies an event rule's match,
// or a rate rule's alert of one job (BY: name); a held alert is shown,
// marked with the causes, and not notified. It must answer at once.
type Holder interface {
	HeldBy(tenant, job string) []string
}

// Defaults of Options.
const (
	DefaultInterval       = 10 * time.Second
	DefaultDedupWindow    = 2 * time.Minute // invariant 6 in docs/architecture.md
	DefaultRepeatInterval = 4 * time.Hour
	DefaultKeepResolved   = 24 * time.Hour
	DefaultMaxResolved    = 1000
	DefaultQueueLen       = 4096
	// DefaultMaxAlerts bounds one tenant's open rate-rule alerts. The
	// design's largest tenant is 100 000 jobs: one BY: name rule over all
	// of them fits; a tenant's many such rules over the same failed jobs
	// (an alert per rule and job) do not.
	DefaultMaxAlerts = 100_000
	// SelfGroupWindow folds repeated self-alerts of one name, as
	// GROUP_WINDOW does for event rules.
	SelfGroupWindow = 5 * time.Minute
)

// Options configure an Engine. Store and Sender are required.
type Options struct {
	// Rules are the first rules of the default tenant ""; SetRules
	// replaces them and sets other tenants'.
	Rules  []*rules.Rule
	Store  MetricsReader
	Sender Sender
	Locker Locker     // default NewMemoryLocker(Clock)
	State  StateStore // default NewMemoryState()
	// Owed records what is decided and not yet with the Sender where
	// another process takes it over (the three-process mode); nil: the
	// State's owed list alone keeps it.
	Owed   OwedStore
	Clock  apollo.Clock // default apollo.SystemClock
	Logger *slog.Logger // default slog.Default()

	Interval time.Duration // rate rules are evaluated this often; default 10s
	// DedupWindow: a notification with the same tenant and DedupKey goes
	// out at most once within it, across every engine sharing the Locker.
	// Default 2m; negative turns the lock off.
	DedupWindow time.Duration
	// RepeatInterval: a firing alert nobody acknowledged is notified
	// again this often. Default 4h; negative turns repeats off.
	RepeatInterval time.Duration
	// KeepResolved and MaxResolved bound the resolved alerts kept for the
	// API, per tenant. Defaults 24h and 1000.
	KeepResolved time.Duration
	MaxResolved  int
	// SelfChannels receive SelfAlert notifications; none: the self-alerts
	// only show in the API.
	SelfChannels []string
	// Holder, when set, holds the notifications of alerts that are echoes
	// of another job's trouble.
	Holder Holder
	// QueueLen bounds the event-rule notifications waiting for the dedup
	// lock; past it they are dropped and counted. Default 4096.
	QueueLen int
	// MaxAlerts bounds the pending and firing alerts of one tenant's rate
	// rules; a new one past it is not opened, and is counted
	// (Stats.Refused), logged and told as a self-alert. Default
	// DefaultMaxAlerts.
	MaxAlerts int
}

func (o *Options) setDefaults() {
	o.Clock = cmp.Or[apollo.Clock](o.Clock, apollo.SystemClock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Locker == nil {
		o.Locker = NewMemoryLocker(o.Clock)
	}
	if o.State == nil {
		o.State = NewMemoryState()
	}
	o.Interval = cmp.Or(o.Interval, DefaultInterval)
	o.DedupWindow = cmp.Or(o.DedupWindow, DefaultDedupWindow)
	o.RepeatInterval = cmp.Or(o.RepeatInterval, DefaultRepeatInterval)
	o.KeepResolved = cmp.Or(o.KeepResolved, DefaultKeepResolved)
	o.MaxResolved = cmp.Or(o.MaxResolved, DefaultMaxResolved)
	o.QueueLen = cmp.Or(o.QueueLen, DefaultQueueLen)
	o.MaxAlerts = cmp.Or(o.MaxAlerts, DefaultMaxAlerts)
}

func (o *Options) validate() error {
	bad := func(field, msg, hint string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: "alert." + field, Message: msg, Hint: hint}
	}
	switch {
	case o.Store == nil:
		return bad("Store", "no metrics store", "pass the metrics.Aggregator (or the Redis store) the bus writes to")
	case o.Sender == nil:
		return bad("Sender", "no sender", "pass the notify.Dispatcher; without channels, one that discards")
	case o.Interval < time.Second:
		return bad("Interval", fmt.Sprintf("%v is below 1s", o.Interval), "leave it unset for 10s; metrics move in 10-second buckets")
	case o.KeepResolved < 0:
		return bad("KeepResolved", fmt.Sprintf("%v is negative", o.KeepResolved), "leave it unset for 24h")
	case o.MaxResolved < 0 || o.QueueLen < 0 || o.MaxAlerts < 0:
		return bad("MaxResolved", "a limit is negative", "leave MaxResolved, MaxAlerts and QueueLen unset for the defaults")
	case o.RepeatInterval > 0 && o.DedupWindow > 0 && o.RepeatInterval < o.DedupWindow:
		return bad("RepeatInterval", fmt.Sprintf("%v is shorter than the dedup window %v, so repeats would be swallowed", o.RepeatInterval, o.DedupWindow),
			"make the repeat interval at least the dedup window")
	}
	return nil
}
