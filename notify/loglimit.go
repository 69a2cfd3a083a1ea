package notify

import (
	"context"
	"log/slog"
	"time"
)

// logEvery is how often one kind of line (say "dropped on channel X") may be
// logged. A dead channel or a storm would otherwise write a line per
// notification; the next line that gets through says how many were held back.
const logEvery = 10 * time.Second

// logLimited logs msg at level unless a line with the same key was logged
// within logEvery.
func (d *Dispatcher) logLimited(level slog.Level, key, msg string, attrs ...slog.Attr) {
	ok, held := d.logs.Allow(key, d.clock.Now())
	if !ok {
		return
	}
	if held > 0 {
		attrs = append(attrs, slog.Int("suppressed", held))
	}
	d.opts.Logger.LogAttrs(context.Background(), level, msg, attrs...)
}
