// Package sched is Apollo-11's own small scheduler. It reads a jobs file
// (cron or @every schedules, or "after" dependencies), runs each job as a
// process in its own process group with a timeout, retries and a concurrency
// policy, and reports every step of every run as apollo.Events through a
// Reporter, so that a run of the scheduler looks to Apollo-11 exactly like a
// run reported by any other executor (docs/scheduler.md).
//
// Parse or LoadFile a jobs file, build a Scheduler with New, Start it, and
// Stop it on shutdown. Time comes from the injected apollo.Clock only.
package sched
