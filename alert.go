package apollo

import (
	"cmp"
	"time"
)

// AlertState is where an alert is in its lifecycle:
// inactive -> pending -> firing -> resolved.
type AlertState string

const (
	AlertInactive AlertState = "inactive"
	AlertPending  AlertState = "pending"
	AlertFiring   AlertState = "firing"
	AlertResolved AlertState = "resolved"
)

// Severity orders alerts for people and for routing.
type Severity string

const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Alert is one episode of one rule's condition for one group (the prefix as
// a whole, or one job name with BY: name). A new episode gets a new ID.
type Alert struct {
	ID       string            `json:"id"`
	Tenant   string            `json:"tenant,omitempty"`
	Rule     string            `json:"rule"`
	Group    string            `json:"group"` // the prefix, or the job name with BY: name
	State    AlertState        `json:"state"`
	Severity Severity          `json:"severity"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Summary is one human line: what holds, for which jobs, with the value.
	Summary    string    `json:"summary"`
	Expr       string    `json:"expr,omitempty"`
	Value      float64   `json:"value"`
	Channels   []string  `json:"channels,omitempty"`
	TopNames   []string  `json:"topNames,omitempty"`
	Count      int       `json:"count,omitempty"`  // events folded into this alert (event rules)
	StartedAt  time.Time `json:"startedAt"`        // condition first true (pending)
	FiredAt    time.Time `json:"firedAt,omitzero"` // became firing
	ResolvedAt time.Time `json:"resolvedAt,omitzero"`
	AckedBy    string    `json:"ackedBy,omitempty"`
	AckedAt    time.Time `json:"ackedAt,omitzero"`
	// SilencedAt is when a silence first held back one of the alert's
	// notifications, and SilenceID which: the alert's history keeps it
	// after the silence has ended.
	SilencedAt time.Time `json:"silencedAt,omitzero"`
	SilenceID  string    `json:"silenceID,omitempty"`
	// InhibitedBy names what holds this alert's notifications: the jobs
	// whose trouble it echoes (job expectations' upstream, or the job
	// itself while it flaps), and the rule of a firing alert that holds it
	// under an INHIBIT rule. Empty: the alert is its own.
	InhibitedBy []string `json:"inhibitedBy,omitempty"`
}

// stateRank is where each state comes in a list of alerts: what needs
// someone now first.
var stateRank = map[AlertState]int{AlertFiring: 0, AlertPending: 1, AlertResolved: 2, AlertInactive: 3}

// Since is when the alert entered its current state, as lists show it:
// resolved, fired, or started.
func (a *Alert) Since() time.Time {
	switch {
	case a.State == AlertResolved && !a.ResolvedAt.IsZero():
		return a.ResolvedAt
	case !a.FiredAt.IsZero():
		return a.FiredAt
	}
	return a.StartedAt
}

// Name is how messages name the alert: "rule (group)", or the rule alone
// when the alert has no group (a rule without a prefix).
func (a *Alert) Name() string {
	if a.Group == "" {
		return a.Rule
	}
	return a.Rule + " (" + a.Group + ")"
}

// CompareAlerts is the order every view lists alerts in (the CLI, the
// TUI): firing, then pending, then resolved; within a state the newest
// (by Since) first, then by ID.
func CompareAlerts(a, b *Alert) int {
	return cmp.Or(cmp.Compare(stateRank[a.State], stateRank[b.State]), b.Since().Compare(a.Since()), cmp.Compare(a.ID, b.ID))
}

// NotificationKind says which template renders a notification.
type NotificationKind string

const (
	NotifyFiring   NotificationKind = "firing"
	NotifyResolved NotificationKind = "resolved"
	NotifyStorm    NotificationKind = "storm" // a follow-up folding many matches of an event rule
	NotifyRepeat   NotificationKind = "repeat"
	NotifyTest     NotificationKind = "test"
	NotifySelf     NotificationKind = "self" // Apollo-11 about itself (holding area full, component down)
)

// Notification is what the alert engine hands to delivery: one alert, one
// reason to tell people about it, and the channels to use.
type Notification struct {
	Kind     NotificationKind `json:"kind"`
	Alert    Alert            `json:"alert"`
	Channels []string         `json:"channels"`
	// DedupKey identifies "the same notification" for the dedup window.
	DedupKey string    `json:"dedupKey"`
	At       time.Time `json:"at"`
}

// Attempt is one entry of the delivery record: a try to send a
// notification to a channel, or a decision not to (package notify names
// the outcomes). Error never contains a secret.
type Attempt struct {
	ID       string           `json:"id"`
	Tenant   string           `json:"tenant,omitempty"` // the alert's tenant: who may see this
	Channel  string           `json:"channel"`
	AlertID  string           `json:"alertID,omitempty"`
	Kind     NotificationKind `json:"kind"`
	DedupKey string           `json:"dedupKey,omitempty"`
	At       time.Time        `json:"at"`
	Try      int              `json:"try,omitempty"` // 1 for the first try; 0 when nothing was tried
	Outcome  string           `json:"outcome"`
	Error    string           `json:"error,omitempty"`
	Latency  time.Duration    `json:"latency,omitempty"`
}

// AttemptFilter selects attempts of the delivery record. Tenant always
// applies (the default tenant is ""); other empty fields match
// everything; Limit 0 means no limit.
type AttemptFilter struct {
	Tenant  string
	Channel string
	AlertID string
	Limit   int
}
