package notify

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// Channel types that the subpackages provide.
const (
	TypeDingTalk = "dingtalk"
	TypeEmail    = "email"
	TypeWeCom    = "wecom"
	TypeFeishu   = "feishu"
	TypeSlack    = "slack"
	TypeWebhook  = "webhook"
	TypeConsole  = "console"
)

// Defaults of a Channel.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultGiveUpAfter = time.Hour
	DefaultQueueSize   = 1000
	// DefaultRobotRate is the rate for DingTalk and WeCom robots: both
	// allow 20 messages a minute and mute a robot that sends more.
	DefaultRobotRate = 20
	// MaxQueueSize bounds QueueSize: a tenant's queue in a lane grows up
	// to it (about 500 bytes a slot) and is scanned by every garbage
	// collection, so the largest takes 50 MB a tenant.
	MaxQueueSize = 100000
	// DefaultQueueTotalTenants is how many tenants' full queues a channel
	// holds by default (QueueTotal): ten times queue_size, at most
	// MaxQueueSize.
	DefaultQueueTotalTenants = 10
)

// AllTenants in a Channel's Tenants shares the channel with every tenant.
const AllTenants = "*"

// Channel is one configured destination and how to deliver to it.
type Channel struct {
	Name     string   // the name rules use in NOTIFY:
	Type     string   // dingtalk, email, wecom, feishu, slack, webhook, console
	Notifier Notifier // sends one message
	// Tenants may name the channel in their rules and be notified through
	// it: nil is the default tenant ("") alone, so that a configuration
	// without tenants works as it is; AllTenants shares it with every
	// tenant.
	Tenants []string
	Lang    string // "en" (default) or "zh-CN"
	// Templates overrides the default templates by kind (text/template
	// source); see docs/notifications.md for what a source may define.
	Templates map[apollo.NotificationKind]string
	// RatePerMinute caps the messages sent per minute; 0 is unlimited.
	// channels.Build sets 20 for dingtalk and wecom unless configured.
	RatePerMinute int
	Timeout       time.Duration // per attempt; default 10s
	GiveUpAfter   time.Duration // stop retrying and record gave_up; default 1h
	// QueueSize is how many notifications of each tenant may wait;
	// default 1000. Each tenant has its own, so that one tenant's storm
	// never drops another's notifications.
	QueueSize int
	// QueueTotal is how many notifications of all tenants together may
	// wait, so that the channel's memory does not grow with the number of
	// tenants; default 10 × QueueSize, at most MaxQueueSize. Past it the
	// tenant with the longest queue overflows: its newest is dropped to
	// make room for a tenant with a shorter queue (by two or more), else
	// the new one is dropped.
	QueueTotal int
}

// withDefaults fills the zero fields that have defaults.
func (c Channel) withDefaults() Channel {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.GiveUpAfter = cmp.Or(c.GiveUpAfter, DefaultGiveUpAfter)
	c.QueueSize = cmp.Or(c.QueueSize, DefaultQueueSize)
	if c.QueueTotal == 0 && c.QueueSize > 0 && c.QueueSize <= MaxQueueSize { // else validate refuses queue_size
		c.QueueTotal = max(min(DefaultQueueTotalTenants*c.QueueSize, MaxQueueSize), c.QueueSize)
	}
	return c
}

// validate checks a channel after defaults; every message names the
// channel and the field.
func (c Channel) validate() error {
	field := func(f string) string { return "channels." + c.Name + "." + f }
	var errs []error
	bad := func(f, msg, hint string) {
		errs = append(errs, &apollo.Error{Code: apollo.EINVALID, Field: field(f), Message: msg, Hint: hint})
	}
	if c.Notifier == nil {
		bad("type", "channel has no notifier", "build channels with notify/channels.Build")
	}
	if _, ok := normalizeLang(c.Lang); !ok {
		bad("lang", fmt.Sprintf("no templates for language %q", c.Lang), `use "en" or "zh-CN"`)
	}
	if c.RatePerMinute < 0 {
		bad("rate_per_minute", fmt.Sprintf("rate %d is negative", c.RatePerMinute), "use 0 for no limit")
	}
	if c.Timeout < 0 {
		bad("timeout", "timeout is negative", "use a positive duration such as 10s")
	}
	if c.GiveUpAfter < 0 {
		bad("give_up_after", "give_up_after is negative", "use a positive duration such as 1h")
	}
	switch {
	case c.QueueSize < 0:
		bad("queue_size", "queue size is negative", "use a positive size such as 1000")
	case c.QueueSize > MaxQueueSize:
		bad("queue_size", fmt.Sprintf("queue size %d is over the most a channel may hold (%d)", c.QueueSize, MaxQueueSize),
			"a channel that is down keeps its queue full anyway; give_up_after says how long a message waits")
	}
	switch {
	case c.QueueTotal < 0:
		bad("queue_total", "queue total is negative", "use a positive size such as 10000, or leave it out for 10 × queue_size")
	case c.QueueTotal > MaxQueueSize:
		bad("queue_total", fmt.Sprintf("queue total %d is over the most a channel may hold (%d)", c.QueueTotal, MaxQueueSize),
			"a channel that is down keeps its queue full anyway; give_up_after says how long a message waits")
	case c.QueueSize > 0 && c.QueueSize <= MaxQueueSize && c.QueueTotal < c.QueueSize:
		bad("queue_total", fmt.Sprintf("queue total %d is below queue_size (%d): no tenant could fill its own queue", c.QueueTotal, c.QueueSize),
			"make queue_total at least queue_size, or leave it out for 10 × queue_size")
	}
	switch {
	case c.Tenants != nil && len(c.Tenants) == 0:
		bad("tenants", "an empty list lets no tenant use the channel",
			`leave tenants out for a channel of the default tenant, or list the tenants ("*" for all)`)
	case len(c.Tenants) > 1 && slices.Contains(c.Tenants, AllTenants):
		bad("tenants", `"*" already shares the channel with every tenant`, `write tenants: ["*"] alone, or list the tenants`)
	}
	return errors.Join(errs...)
}

// Serves reports whether tenant's alerts may go to the channel.
func (c Channel) Serves(tenant string) bool {
	if c.Tenants == nil {
		return tenant == ""
	}
	return slices.Contains(c.Tenants, AllTenants) || slices.Contains(c.Tenants, tenant)
}

// foldsBacklog reports whether what waited while the channel was down
// goes out as one digest once it is back, and what a stopped process
// owed as one digest after the restart: for channels that people read
// (email, Slack and the robots), to whom a thousand messages in a row are
// a storm that buries the one that matters. Never for a webhook: its
// receiver is a machine (an incident tool, a ticket system) that wants
// every notification as its own request. Nor for the console, a log.
func (c Channel) foldsBacklog() bool {
	switch c.Type {
	case TypeEmail, TypeSlack, TypeDingTalk, TypeWeCom, TypeFeishu:
		return true
	}
	return false
}
