package console

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo/internal/termtext"
	"github.com/apollo-11/apollo/notify"
)

// Notifier writes each message to a writer: a title line naming the
// channel, the body and a blank line; or, with the line body, one line.
// The writer is a terminal: the text, which reporters chose in part (job
// names, summaries), has its control characters escaped.
type Notifier struct {
	name string // the channel's: several console channels share a terminal
	body string
	loc  *time.Location
	mu   sync.Mutex // one message at a time, never interleaved
	w    io.Writer
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks cfg and returns a notifier writing to opts.Output.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts = opts.WithDefaults()
	return &Notifier{name: opts.Name, body: cfg.Body, loc: opts.Location, w: opts.Output}, nil
}

// Notify writes m. A failed write is not retried: a console that cannot
// be written to will not get better.
func (n *Notifier) Notify(_ context.Context, m *notify.Message) (bool, error) {
	var out string
	switch n.body {
	case "line":
		out = n.line(m)
	case "markdown":
		out = n.block(m.Title, m.Markdown)
	default:
		out = n.block(m.Title, m.Text)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := io.WriteString(n.w, out); err != nil {
		return false, fmt.Errorf("console: %w", err)
	}
	return false, nil
}

func (n *Notifier) block(title, body string) string {
	if n.name != "" {
		title = n.name + ": " + title
	}
	return "== " + termtext.Escape(title) + " ==\n" + termtext.EscapeLines(body) + "\n\n"
}

// line is "15:04:05 NAME: TITLE — SUMMARY", on one line whatever the
// summary holds.
func (n *Notifier) line(m *notify.Message) string {
	var b strings.Builder
	if at := m.Notification.At; !at.IsZero() {
		b.WriteString(at.In(n.loc).Format(time.TimeOnly) + " ")
	}
	if n.name != "" {
		b.WriteString(n.name + ": ")
	}
	b.WriteString(m.Title)
	if s := m.Notification.Alert.Summary; s != "" && !strings.Contains(m.Title, s) {
		b.WriteString(" — " + s)
	}
	return termtext.Escape(strings.Join(strings.Fields(b.String()), " ")) + "\n"
}
