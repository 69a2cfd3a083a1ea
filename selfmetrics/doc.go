// Package selfmetrics serves Apollo-11's own figures: GET /metrics in the
// Prometheus text format (docs/monitoring.md) and the body of
// GET /api/v1/system, from the same parts, read at each request.
//
// A part is one component of the process: a name and a function that
// reads its Stats, whose Figures method writes the figures (apollo.Family
// is declared beside the counters). cmd/apollo lists the parts a process
// runs; this package knows none of their types. It is the only package
// that imports the Prometheus client library.
package selfmetrics
