package sched

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	apollo "github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/loglimit"
)

// Reporter delivers the events of every run to Apollo-11. In production it
// is the Go SDK's client (agent.Client), which never blocks and spools
// while the server is unreachable. Send is called from the scheduler's own
// goroutines, sometimes while it holds its lock: it must return quickly. An
// error is logged (rate-limited) and counted, never fatal: a monitoring
// outage does not stop jobs.
type Reporter interface {
	Send(ev apollo.Event) error
}

// ReporterFunc adapts a function to Reporter.
type ReporterFunc func(ev apollo.Event) error

// Send calls f(ev).
func (f ReporterFunc) Send(ev apollo.Event) error { return f(ev) }

var _ Reporter = ReporterFunc(nil)

// logEvery is how often one kind of repeated failure is logged.
const logEvery = 10 * time.Second

// reporter numbers, checks and sends events, and counts failures.
type reporter struct {
	to       Reporter
	tenant   string
	clock    apollo.Clock
	log      *slog.Logger
	limit    *loglimit.Limiter
	failures atomic.Int64
}

func (r *reporter) send(ev apollo.Event) {
	ev.Tenant = r.tenant
	if err := ev.Validate(); err != nil {
		// Only a bug gets here: say so loudly, but still try to deliver.
		r.log.Error("sched: built an invalid event", "task", ev.TaskID, "err", err)
	}
	if err := r.to.Send(ev); err != nil {
		n := r.failures.Add(1)
		if ok, suppressed := r.limit.Allow("", r.clock.Now()); ok {
			r.log.Warn("sched: reporting an event failed; the job runs on", "task", ev.TaskID, "status", ev.Status,
				"err", err, "failures", n, "suppressed", suppressed)
		}
	}
}

// task is one attempt of one run as Apollo-11 sees it: a task ID and its
// sequence numbers. The scheduler owns the run, so it numbers the events.
type task struct {
	id  string
	js  *jobState
	seq int64
}

// taskKey is the trigger part of a task ID: the scheduled time in UTC, or
// "manual-<unix ms>".
func scheduledKey(at time.Time) string { return at.UTC().Format("20060102T150405Z") }
func manualKey(ms int64) string        { return "manual-" + strconv.FormatInt(ms, 10) }

func taskID(job, key string, attempt int) string {
	return job + "@" + key + "#" + strconv.Itoa(attempt)
}

// event builds the next event of t.
func (t *task) event(status apollo.Status, now time.Time) apollo.Event {
	t.seq++
	return apollo.Event{TaskID: t.id, Name: t.js.name, Sequence: t.seq, Status: status, Ts: now.UnixMilli()}
}

// encodeExtra marshals fields plus the output tails into at most
// apollo.MaxExtraBytes of JSON, cutting the oldest lines of the longer tail
// until it fits: escaping can make 2 KiB of output much longer in JSON.
// Without tails, the longest text field is cut in its middle: an error
// that names a long path must not make the run's end an event that is
// refused, which left the run unfinished.
func encodeExtra(fields map[string]any, stdout, stderr string) json.RawMessage {
	for {
		if stdout != "" {
			fields["stdoutTail"] = stdout
		}
		if stderr != "" {
			fields["stderrTail"] = stderr
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(fields); err != nil {
			return json.RawMessage(`{"error":"extra not encodable"}`)
		}
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if len(b) <= apollo.MaxExtraBytes {
			return b
		}
		delete(fields, "stdoutTail")
		delete(fields, "stderrTail")
		if stdout == "" && stderr == "" {
			if !cutLongestText(fields) {
				return b
			}
			continue
		}
		if len(stdout) >= len(stderr) {
			stdout = cutFront(stdout)
		} else {
			stderr = cutFront(stderr)
		}
	}
}

// cutLongestText shortens the longest string of fields by a quarter, from
// its middle, keeping its start and its end (an error's reason is at its
// end). It reports false when there is no string long enough to cut.
func cutLongestText(fields map[string]any) bool {
	key, longest := "", 64
	for k, v := range fields {
		if s, ok := v.(string); ok && len(s) > longest {
			key, longest = k, len(s)
		}
	}
	if key == "" {
		return false
	}
	s := fields[key].(string)
	keep := len(s) * 3 / 8
	fields[key] = strings.ToValidUTF8(s[:keep], "") + "…" + strings.ToValidUTF8(s[len(s)-keep:], "")
	return true
}

// cutFront drops the first line of s, or its first quarter when s is one
// line, keeping the result valid UTF-8.
func cutFront(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
		return s[i+1:]
	}
	s = s[len(s)-len(s)*3/4:]
	return strings.ToValidUTF8(s, "")
}
