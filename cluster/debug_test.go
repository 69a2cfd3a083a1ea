package cluster

import (
	"encoding/json"
	"testing"
)

var debugCluster *testCluster

func init() {
	dumpState = func(t *testing.T, id string) {
		c := debugCluster
		p := Partition(id, c.parts)
		t.Logf("task %s is in partition %d", id, p)
		for _, n := range c.nodes {
			st := n.NodeStats()
			for _, ps := range st.Partitions {
				if ps.Partition == p {
					b, _ := json.Marshal(ps)
					t.Logf("node %s: %s", n.id, b)
				}
			}
			t.Logf("node %s leases %v", n.id, st.Leases)
		}
	}
}
