package slack

import (
	"context"

	"github.com/apollo-11/apollo/notify"
)

// Slack's limits on block text.
const (
	maxHeader  = 150
	maxSection = 3000
)

// Notifier posts to one Slack incoming webhook. Slack answers 200 "ok", or
// an error status with a word such as invalid_payload; 429 and 5xx are
// retried.
type Notifier struct {
	cfg  Config
	hook notify.Endpoint
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks cfg and returns its notifier.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{cfg: cfg, hook: notify.Endpoint{Channel: "slack", Client: opts.WithDefaults().Client}}, nil
}

type payload struct {
	Text   string  `json:"text"`
	Blocks []block `json:"blocks"`
}

type block struct {
	Type string `json:"type"`
	Text text   `json:"text"`
}

type text struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Notify sends m.
func (n *Notifier) Notify(ctx context.Context, m *notify.Message) (bool, error) {
	return n.hook.PostJSON(ctx, string(n.cfg.URL), n.payload(m))
}

// payload: text is what notifications and old clients show; the blocks
// are the message itself.
func (n *Notifier) payload(m *notify.Message) payload {
	title := notify.Truncate(m.Title, maxHeader)
	return payload{Text: escape(m.Title), Blocks: []block{
		{Type: "header", Text: text{Type: "plain_text", Text: title}},
		{Type: "section", Text: text{Type: "mrkdwn", Text: notify.Truncate(mrkdwn(m.Markdown), maxSection)}},
	}}
}
