// Package alerttest holds the conformance suites for the alert engine's
// stores: RunLocker for dedup locks and RunStateStore for alert state.
// The memory implementations in package alert pass them; redisstore runs
// them against a real Redis.
package alerttest
