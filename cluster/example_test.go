package cluster_test

import (
	"fmt"

	"github.com/apollo-11/apollo/cluster"
)

// An agent that publishes to NATS directly computes the subject and the
// message ID itself (docs/scale-out.md).
func ExampleEventSubject() {
	const partitions = 16
	p := cluster.Partition("batch_report-42", partitions)
	fmt.Println(cluster.EventSubject("", p))
	fmt.Println(cluster.EventSubject("team.a", p))
	fmt.Println(cluster.MsgID("", "batch_report-42", 2))
	fmt.Println(cluster.MsgID("team.a", "batch_report-42", 2))
	// Output:
	// apollo.events._.15
	// apollo.events.team%2Ea.15
	// _/batch_report-42:2
	// team%2Ea/batch_report-42:2
}
