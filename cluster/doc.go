// Package cluster runs several bus nodes behind NATS JetStream (the
// scale-out mode, docs/scale-out.md).
//
// Events are partitioned by task: partition = FNV-1a(taskID) mod N. Any
// node takes events over HTTP and publishes the events bound for one
// stream subject, apollo.events.<tenant>.<partition>, in batches: one
// message in flight per subject, the events of the requests that came
// meanwhile together in the next (a group commit); it answers "accepted"
// once JetStream has stored the batch holding the event. Each partition is owned by one node at a
// time, under a lease in a JetStream key-value bucket. The owner applies the
// partition's events, in stream order, to a bus.Bus of its own whose log is
// a JetStream subject (apollo.log.<partition>): every decision the bus
// makes, the executors' reports as well as the timeouts, missed starts and
// corrections it writes itself, is appended there, fenced by the expected
// last sequence so that only one owner can ever write it. A node that takes
// a partition over rebuilds the bus, and the partition's metrics, by
// replaying that log, exactly as a single server recovers from its
// write-ahead log, then reads the events from where the log says the old
// owner stopped.
//
// Metrics of a partition are flushed to Redis with the partition as the
// writer, as absolute values: whichever node owns a partition writes the
// same numbers, so moving it never counts twice. Queries for a task go to
// its partition's owner over NATS request-reply; listings ask every node;
// applied changes are published on apollo.changes.> for every node's
// stream.
//
//	node, _ := cluster.New(cluster.Options{Conn: nc, NodeID: "bus-1", Partitions: 16, Redis: rdb})
//	node.Start(ctx)      // claims its share of partitions
//	defer node.Stop(ctx) // hands them over
//	api := httpapi.New(httpapi.Options{Bus: node, ...})
package cluster
