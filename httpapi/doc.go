// Package httpapi is Apollo-11's HTTP face: event ingest, task queries and
// corrections, metrics, alerts, rules, the WebSocket stream, ping URLs and
// health. Every route is declared once, with the role it needs, in the
// table in routes.go; errors are mapped to HTTP statuses in one table in
// errors.go. The package holds no state of its own: it talks to the bus,
// the metrics store and the alert engine through small interfaces.
package httpapi
