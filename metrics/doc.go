// Package metrics counts what tasks do, per tenant and job name, in
// 10-second buckets, and answers windows over them for the alert engine,
// the HTTP API and the dashboards.
//
// The bus hands every applied change to a Store's writer as an
// apollo.Change; PlanChange turns it into contributions:
//
//   - started: the task went to running, at the record's Ts;
//   - count and success/failed/timeout, with its cost (sum, n, min, max)
//     when Task.CostMs > 0, counted as at most MaxCostMs: the task became
//     final, at Task.FinishedAt (the record's Ts when the bus left it
//     zero). A change that moves a task out of a final state or between
//     final states (a manual correction) takes the old finish out of the
//     bucket of Prev.FinishedAt first, so the counts always equal a
//     recount of the tasks' final states;
//   - late: Change.BecameLate or a missed start; missed: a missed start;
//     both at the record's Ts;
//   - backlog and running: +1/-1 as a task enters and leaves pending and
//     running, at the record's Ts; a task leaves running no earlier than
//     its StartedAt, so a start reported by a fast clock never makes the
//     gauge negative. Summed over buckets they give the number of tasks
//     pending and running at the end of any bucket; a level below zero
//     (a pending reported by a fast clock) reads as zero.
//
// Every bucket is the timestamp floored to 10 s (Unix ms / 10000 * 10000),
// never the arrival time: an event at 09.999 s and one at 10.000 s fall in
// different buckets whichever arrives first, so late or reordered reports
// still land where they happened and a replay gives the same numbers (invariants
// 2 and 5 in docs/architecture.md).
//
// Timestamps older than the rollup retention, or more than MaxSkew (1 min)
// ahead of when the server received their record (Record.ReceivedAt), are
// not counted and show in Stats.TooOld and Stats.TooNew: a far-future
// bucket would sit outside every window until its time came, and a wrong
// clock at one reporter should not fill it. Too new is judged against the
// receipt, which the log keeps, not against the clock when the change is
// applied: a replay after a restart, or a node taking a partition over,
// then drops and counts what the first application did. Their gauge moves
// are clamped into the accepted range rather than dropped, or a task would
// stay in the backlog for ever.
//
// A window of W ending at now is the buckets whose start lies in
// (floor10(now) - W, floor10(now)]: the current, partial bucket and the
// W/10s-1 before it; Query.Offset shifts it into the past. Buckets are
// kept BucketRetention (1 h); older parts of a window come from 1-minute
// rollups kept RollupRetention (24 h). Precisely, with
// keep(R) = floor60(floor10(now) + 10s - R): a window bound at or after
// keep(BucketRetention) is exact; an older one is rounded down to its
// minute, and one older than keep(RollupRetention) reads as that minute.
// So adjacent windows and Series steps never overlap or leave gaps, and a
// window never reaches data that has expired, whenever compaction last
// ran. Gauges at a bound count every move before it, expired or not.
//
// Cost sums cannot go negative: a window's sum that passes int64 reads as
// MaxInt64 (see costSum), and Table.Sum totals rows in 128 bits.
//
// Each job keeps cumulative sums at its non-empty buckets only, so memory
// follows activity and a window is the difference of two binary searches.
// Rolling needs no ring of accumulators, one per minute slot: events are at most
// MaxSkew ahead of their receipt, so the last minute lies among a job's newest few buckets
// and is found by a short walk from the end.
//
// Each job also keeps a health record (runs.go): its newest RecentRuns
// runs in the order of their first report, a histogram of its run
// durations and when a run last ended with each final status. The bus
// indexes tasks by ID only; this answers "how did this job's last runs
// go" (JobsHealth, RecentRuns) in O(RecentRuns) per job. Only the
// Aggregator keeps it: the job health views need the bus's process.
//
// Aggregator is the in-memory Store. Another Store (redisstore) applies the
// same Plans and must pass the conformance suite in metricstest.
package metrics
