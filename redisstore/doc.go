// Package redisstore is the Redis side of Apollo-11's shared state in the
// three-process and scale-out modes: the metrics a bus process flushes and
// the alert processes read, and the alert engine's dedup lock. It is the
// only package that imports go-redis.
//
// The bus keeps its metrics.Aggregator as the source of truth. A Flusher
// stands in front of it as the bus's observer, marks the jobs each change
// touches, and every FlushInterval copies their changed buckets to Redis as
// absolute values in one pipeline, so a retried flush, a replayed log or a
// restarted bus never counts twice. A Store answers metrics.Store from
// Redis with the Aggregator's window rules; both pass metricstest.Run.
// Locker is SET NX PX. Outbox is the alert processes' notify.Outbox: each
// process owns its entries under a lease, and another takes them over
// only once that lease is gone; both outboxes pass outboxtest.Run.
//
//	agg, _ := metrics.New(metrics.Options{Clock: clock})
//	fl, _ := redisstore.NewFlusher(agg, redisstore.Options{Client: rdb, Clock: clock})
//	fl.Start(ctx)        // bus.Options{Observers: []bus.Observer{fl}}
//	defer fl.Stop(ctx)   // flushes one last time
//	st, _ := redisstore.NewStore(redisstore.Options{Client: rdb})
//
// docs/redis.md describes the keys, the flush, several writers, outages and
// what to monitor.
package redisstore
