// Package agent is the Go SDK that task executors use to report each run's
// lifecycle to Apollo-11 (docs/protocol.md). It imports only the standard
// library and the root package, so an executor pulls in nothing else.
//
// A Client owns one sender goroutine that batches events and POSTs them to
// /api/v1/events, retrying what the server could not take. Reporting never
// blocks on the network: a Task method numbers the event and queues it.
// With a spool directory, events that cannot be sent or kept in memory are
// written to disk and sent by this or the next process.
//
//	c, err := agent.New("http://127.0.0.1:1969", agent.WithToken(token),
//		agent.WithSpoolDir("/var/lib/myjob/apollo-spool"))
//	if err != nil {
//		return err
//	}
//	defer c.Close(context.Background())
//
//	run := c.Task("backup-2024-06-01", "nightly_backup")
//	run.Running(agent.TimeoutAfter(time.Hour))
//	if err := backup(); err != nil {
//		run.Fail(agent.Extra(map[string]any{"error": err.Error()}))
//		return err
//	}
//	run.Succeed()
package agent
