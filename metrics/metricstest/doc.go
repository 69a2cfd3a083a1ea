// Package metricstest is the conformance suite for metrics.Store
// implementations. The embedded Aggregator runs it in its own tests; the
// Redis store runs the same cases, so both count the same things in the
// same buckets and answer every window alike.
//
// Each case applies apollo.Changes through the Harness (made the way the
// bus makes them), moves the store's fake clock, and compares what the
// Store answers with a brute-force recount of the contributions. A store
// that applies metrics.PlanChange's parts gets the counting right by
// construction; the suite then checks its windows, rollups and expiry.
//
//	clock := apollo.NewFakeClock(start)
//	store := newStore(clock) // default retentions
//	metricstest.Run(t, metricstest.Harness{
//		Apply: store.Apply, Sync: store.Flush, Store: store, Clock: clock,
//	})
package metricstest
