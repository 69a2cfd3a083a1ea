package agent

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// logEvery is the least time between two lines of one kind: a server that
// rejects thousands of events a second must not flood the executor's log.
const logEvery = 10 * time.Second

// logLimits rate-limits the client's log lines per kind and says how many
// were left out since the last line.
type logLimits struct {
	log   *slog.Logger
	clock apollo.Clock
	lim   *loglimit.Limiter
}

func newLogLimits(l *slog.Logger, clk apollo.Clock) logLimits {
	return logLimits{log: l, clock: clk, lim: loglimit.New(logEvery)}
}

// allow reports whether a line of this kind may go out now, and how many
// were suppressed before it.
func (l *logLimits) allow(kind string) (bool, int) { return l.lim.Allow(kind, l.clock.Now()) }

// rejected logs an event the server refused, with the server's reason.
func (l *logLimits) rejected(data []byte, e *apollo.Error, status int) {
	ok, skipped := l.allow("rejected")
	if !ok {
		return
	}
	var ev struct {
		TaskID   string `json:"taskID"`
		Sequence int64  `json:"sequence"`
		Status   string `json:"status"`
	}
	_ = json.Unmarshal(data, &ev) // for the log line only
	attrs := []any{"taskID", ev.TaskID, "sequence", ev.Sequence, "status", ev.Status, "suppressed", skipped}
	if status != 0 {
		attrs = append(attrs, "httpStatus", status)
	}
	if e != nil {
		attrs = append(attrs, "code", e.Code, "field", e.Field, "error", e.Message, "hint", e.Hint)
	}
	l.log.Warn("apollo agent: server rejected an event; fix the reporter, it will not be resent", attrs...)
}

// retrying logs events that will be sent again: their request failed, or
// the server answered them retry_later.
func (l *logLimits) retrying(err error, status int, wait time.Duration, events int) {
	if ok, skipped := l.allow("retry"); ok {
		l.log.Warn("apollo agent: events not delivered, will retry", "error", err, "httpStatus", status,
			"wait", wait, "events", events, "suppressed", skipped)
	}
}

func (l *logLimits) spoolError(err error) {
	if ok, skipped := l.allow("spool"); ok {
		l.log.Error("apollo agent: spool", "error", err, "suppressed", skipped)
	}
}

func (l *logLimits) dropped(n int, reason string) {
	if ok, skipped := l.allow("dropped"); ok {
		l.log.Error("apollo agent: events dropped", "events", n, "reason", reason, "suppressed", skipped)
	}
}
