// Package bus keeps the true state of every task.
//
// Publish decides, for each event, under the lock of the task's shard: is it
// a duplicate (its sequence is not above the last one accepted), is its move
// legal (apollo.CanTransition), must it wait for missing earlier events (it
// skips ahead and is not legal yet), or is there no room for it (the holding
// area is full)? An accepted event changes the task, joins its history, and
// is appended to the log in that same critical section, so the log's order
// is the order in which events were decided and replaying it decides the same
// way again. Publish returns once the log says the events are durable.
//
// Each applied change then goes onto its task's queue. A bounded pool of
// workers delivers a task's changes, in order, to the observers (metrics, the
// alert engine's event rules) and to subscribers (the stream). Different
// tasks never wait for each other; a task's queue exists only while it holds
// changes. A queue over its limit spills into a bounded holding area and the
// caller is told to slow down; when the holding area is full, events are
// refused visibly: counted, logged, and reported through Options.OnRefused.
//
// The bus also writes records of its own: a running task past its deadline
// becomes timeout, and a pending task not started within its grace period is
// marked late (a missed start). Finished tasks leave memory after the
// retention; a compact tombstone keeps recognising their late duplicates.
//
// Queries read indexes kept beside the tasks, under the same locks: each
// tenant's tasks in listing order (List, a page at the cost of the page)
// and each job's ping runs that are running (OpenPing, Ping: a ping's end
// pairs with its start in a map lookup).
//
// At start-up, before Start, the log after the snapshot is replayed: Replay
// decides one record at a time on the caller's goroutine; a Replayer
// decides different tasks' records on several goroutines, each task's in
// log order, and hands the changes to the observers directly.
package bus
