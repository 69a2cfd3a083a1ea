package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"text/template"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/keypart"
	"github.com/apollo-11/apollo/notify"
)

// Notifier posts to one endpoint.
type Notifier struct {
	cfg    Config
	name   string
	extURL string
	hook   notify.Endpoint
	body   *template.Template // nil: a standard format
}

var _ notify.DigestCarrier = (*Notifier)(nil)

// New checks cfg, parses its template and tries it on a sample message.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	n := &Notifier{cfg: cfg, name: opts.Name, extURL: opts.ExternalURL,
		hook: notify.Endpoint{Channel: "webhook", Client: opts.Client, Header: http.Header{}}}
	for k, v := range cfg.Headers {
		n.hook.Header.Set(k, string(v))
	}
	if cfg.Template != "" {
		var err error
		if n.body, err = template.New("body").Funcs(funcs(opts.Location)).Parse(cfg.Template); err != nil {
			return nil, notify.Invalid("template", "template does not parse: "+err.Error(), "fix the text/template syntax")
		}
		sample := &notify.Message{Notification: notify.SampleNotification(apollo.NotifyFiring), Title: "title", Text: "text", Markdown: "markdown"}
		if _, err = n.render(sample); errors.Is(err, errTooLarge) {
			return nil, notify.Invalid("template", fmt.Sprintf("the body the template writes for a sample message is over 1 MiB (%d bytes), the most a webhook is sent", MaxBody),
				"have the template write less")
		}
		if err != nil {
			return nil, notify.Invalid("template", "template fails on a sample message: "+err.Error(),
				"the data is a notify.Message: .Title, .Text, .Notification.Alert.Rule ...; see docs/notifications.md")
		}
	}
	return n, nil
}

// funcs are the template functions plus json, which writes a value as
// JSON (a string comes out quoted and escaped, ready to sit in a body).
func funcs(loc *time.Location) template.FuncMap {
	fm := notify.TemplateFuncs(loc)
	fm["json"] = func(v any) (string, error) {
		b, err := notify.EncodeJSON(v)
		return string(b), err
	}
	return fm
}

// MaxBody is the most a webhook is sent in one request: 1 MiB, nginx's
// default client_max_body_size, past which a receiver behind it answers
// 413 and the message is lost there.
const MaxBody = 1 << 20

// errTooLarge is what rendering says of a body past MaxBody.
var errTooLarge = errors.New("body too large")

// Notify posts m in the configured shape. A body past MaxBody is not
// sent: it fails, not retried (it would be as large next time), naming
// the channel, what made the body and the limit.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	body, err := n.render(m)
	if errors.Is(err, errTooLarge) {
		what, hint := "the "+n.cfg.format()+" body of this alert", "a rule's LABELS make most of it: keep their values short"
		if n.body != nil {
			what, hint = "the body its template writes", "have it write less for each notification"
		}
		return false, fmt.Errorf("webhook: channel %s: %s is over 1 MiB (%d bytes), the most a webhook is sent: not sent; %s",
			n.name, what, MaxBody, hint)
	}
	if err != nil {
		return false, fmt.Errorf("webhook: body: %w", err)
	}
	return n.hook.Post(ctx, string(n.cfg.URL), body)
}

// Fits says whether m, a digest, makes a body within MaxBody. A lane
// that folds notifications for this webhook sends as many as fit in one
// body, and the rest in the next ones.
func (n *Notifier) Fits(m *notify.Message) bool {
	_, err := n.render(m)
	return !errors.Is(err, errTooLarge)
}

// render makes m's body, or errTooLarge past MaxBody: a template that
// writes a large field for each notification a digest carries stops as
// soon as it passes it, so its memory is bounded too.
func (n *Notifier) render(m *notify.Message) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case n.body != nil:
		w := &capped{max: MaxBody}
		err = n.body.Execute(w, m)
		if w.over {
			return nil, errTooLarge
		}
		b = w.b.Bytes()
	case n.cfg.format() == FormatAlertmanager:
		b, err = notify.EncodeJSON(alertmanagerPayload(m, n.name, n.extURL))
	default:
		b, err = notify.EncodeJSON(apolloPayload(m))
	}
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBody {
		return nil, errTooLarge
	}
	return b, nil
}

// capped is a buffer that refuses to grow past max.
type capped struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		c.over = true
		return 0, errTooLarge
	}
	return c.b.Write(p)
}

// CarriesInDigest says how many of items one digest body lists in full
// (see listed): a lane under a rate limit sends those and leaves the rest
// for its next turns, so that the receiver, a machine, learns of each. A
// template of one's own is given as many as the standard body would list.
func (n *Notifier) CarriesInDigest(items []*notify.Message) int {
	if n.body == nil && n.cfg.format() == FormatAlertmanager {
		return len(listed(items, func(d *notify.Message) AMAlert { return amAlert(d, n.extURL) }))
	}
	return len(listed(items, func(d *notify.Message) apollo.Notification { return tenantKeyed(d.Notification) }))
}

// ApolloPayload is the default body: the notification as the alert engine
// made it, with the rendered title and text, and for a digest the
// notifications it stands for: Total of them, the first listed in
// Notifications and the Omitted rest only counted (see listed).
type ApolloPayload struct {
	apollo.Notification
	Title         string                `json:"title"`
	Text          string                `json:"text"`
	Notifications []apollo.Notification `json:"notifications,omitempty"`
	Total         int                   `json:"total,omitempty"`
	Omitted       int                   `json:"omitted,omitempty"`
}

func apolloPayload(m *notify.Message) ApolloPayload {
	p := ApolloPayload{Notification: tenantKeyed(m.Notification), Title: m.Title, Text: m.Text}
	if len(m.Digest) > 0 {
		p.Notifications = listed(m.Digest, func(d *notify.Message) apollo.Notification { return tenantKeyed(d.Notification) })
		p.Total, p.Omitted = len(m.Digest), len(m.Digest)-len(p.Notifications)
	}
	return p
}

// A digest's body lists at most digestListed of the notifications it
// stands for, and stops before the listed ones pass digestListBytes: a
// receiver behind nginx refuses a body over 1 MiB (its default
// client_max_body_size) with 413, which would fail the whole digest. The
// rest are counted; a lane never leaves any (CarriesInDigest): it keeps
// them for its next turn.
const (
	digestListed    = 100
	digestListBytes = 256 << 10
)

// listed maps the first of msgs that a digest's body lists, always at
// least one.
func listed[T any](msgs []*notify.Message, each func(*notify.Message) T) []T {
	var out []T
	size := 0
	for _, m := range msgs[:min(len(msgs), digestListed)] {
		v := each(m)
		b, _ := json.Marshal(v)
		if size += len(b); size > digestListBytes && len(out) > 0 {
			break
		}
		out = append(out, v)
	}
	return out
}

// tenantKeyed is n with a dedupKey that names its tenant: inside
// Apollo-11 the key is the rule's, kind and group (the dedup lock adds the
// tenant), and a receiver that keys incidents on it alone would merge two
// tenants' rules of the same name. The default tenant's is as it was.
func tenantKeyed(n apollo.Notification) apollo.Notification {
	if t := n.Alert.Tenant; t != "" && n.DedupKey != "" {
		n.DedupKey = keypart.Escape(t) + ":" + n.DedupKey
	}
	return n
}
