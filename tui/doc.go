// Package tui is `apollo tui`: the terminal dashboard for the people on
// call. It shows Health (the job health board), Tasks, Jobs, Alerts and
// System tabs, fed by the same WebSocket stream as the web dashboard
// (docs/stream.md) plus the REST API for job health and metrics, a task's
// timeline, alerts and silences.
//
// It is a Bubble Tea program. Every read, write, dial and HTTP request runs
// inside a tea.Cmd that a runner tracks, so Run can stop them all and wait;
// the stream is read one message per command, each result scheduling the
// next read. When the connection drops the dashboard says so in its header,
// reconnects with exponential backoff and resumes from the last cursor.
// The screens themselves live in tui/pages, the widgets in tui/components.
package tui
