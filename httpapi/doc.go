// Package httpapi is Apollo-11's HTTP transport: event ingest, task
// queries and corrections, metrics, alerts, rules, ping URLs and health.
// It mounts the WebSocket stream (package stream) and the handler of
// GET /metrics (package selfmetrics). Every route is declared once, with
// the role it needs, in the table in routes.go; errors are mapped to HTTP
// statuses in one table (apiclient.StatusOf, errors.go). It reaches the
// bus, the metrics, the alert engine, the scheduler and the stream
// through small interfaces that cmd/apollo fills; TestImports pins what it
// imports (docs/architecture.md, "Packages").
//
// The only state it holds is the transport's own: each token's ingest
// rate limiter (ratelimit.go). Everything else, the open ping runs
// included (bus.Bus.Ping), belongs to the components behind the
// interfaces.
package httpapi
