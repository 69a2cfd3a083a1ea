// Package metricstest is the conformance suite for metrics.Store
// implementations. The embedded Aggregator runs it in its own tests; the
// Redis store runs the same cases, so both count the same things in the
// same buckets and answer every window alike.
//
// Each case applies apollo.Changes through the Harness (made the way the
// bus makes them), moves the store's fake clock, and compares what the
// Store answers with a brute-force recount of the contributions.
package metricstest
