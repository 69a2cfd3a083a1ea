package console

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/apollo-11/apollo/notify"
)

// Notifier writes each message to a writer: a title line, the body and a
// blank line.
type Notifier struct {
	markdown bool
	mu       sync.Mutex // one message at a time, never interleaved
	w        io.Writer
}

var _ notify.Notifier = (*Notifier)(nil)

// New checks cfg and returns a notifier writing to opts.Output.
func New(cfg Config, opts notify.NotifierOptions) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Notifier{markdown: cfg.Body == "markdown", w: opts.WithDefaults().Output}, nil
}

// Notify writes m. A failed write is not retried: a console that cannot
// be written to will not get better.
func (n *Notifier) Notify(_ context.Context, m *notify.Message) (bool, error) {
	body := m.Text
	if n.markdown {
		body = m.Markdown
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := fmt.Fprintf(n.w, "== %s ==\n%s\n\n", m.Title, body); err != nil {
		return false, fmt.Errorf("console: %w", err)
	}
	return false, nil
}
