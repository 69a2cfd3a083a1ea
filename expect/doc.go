// Package expect is what Apollo-11 expects of each job: when it should run
// (a cron schedule in a time zone, or a period), how late it may start
// (grace), how long a run may take, how often it may run, and which jobs it
// depends on. From the runs it is told about and the time its caller gives
// it, it finds the run that never happened (missed), the run that takes too
// long, the one that ends too soon, the job that runs too often and the one
// that flaps; it answers which failing upstream job an alert is an echo of;
// and it learns a job's schedule and runtime bounds from its history.
//
// The package keeps no goroutine and reads no clock: every function takes
// the time from its caller, so that tests drive it with a fake clock and
// replay gives the same answers. docs/expectations.md is the reference for
// users.
package expect
