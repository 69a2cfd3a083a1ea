package cluster

import "strings"

// Ready is closed once the node has taken its place in the cluster: its
// first round of claims is rebuilt, and it serves its share of the
// partitions, ceil(partitions / live nodes), a partition it failed to
// rebuild counted as served (openretry.go), or the cluster has settled
// without giving it that many: every partition is held by a live lease,
// no node holds more than its share (it would hand some over), and no
// lease of this node's ID is held by another process or still being
// rebuilt. A node restarted right after kill -9 finds its old leases
// under its ID until they expire: it is not ready while it waits for
// them. Once closed it stays closed: a node that later loses partitions,
// or whose share grows when another node dies, still answers every
// request (any node answers for every task), and a load balancer should
// not take every node out at once while the dead node's leases expire.
// A node cut off NATS is another matter (Unavailable).
func (n *Node) Ready() <-chan struct{} { return n.ready }

// checkReady closes ready when Ready's condition holds.
func (n *Node) checkReady() {
	n.readyMu.Lock()
	defer n.readyMu.Unlock()
	if !n.firstDone {
		return
	}
	select {
	case <-n.ready:
		return
	default:
	}
	n.mu.Lock()
	// A partition the node failed to rebuild counts as done: it cannot do
	// better until the cause is mended, and a partition no node can
	// rebuild must not keep every node from being ready.
	serving, failing := len(n.owned), len(n.openFails)
	n.mu.Unlock()
	nodes, leases, held := 0, 0, map[string]int{}
	n.eachLive(func(k string, s seen) {
		if strings.HasPrefix(k, "node.") {
			nodes++
			return
		}
		leases++
		held[s.holder]++
	})
	share := (n.opts.Partitions + max(nodes, 1) - 1) / max(nodes, 1)
	if serving+failing < share && !settled(n.opts.NodeID, n.opts.Partitions, share, serving, leases, held) {
		return
	}
	close(n.ready)
}

// settled says whether no partition is left for a node serving serving
// of them: every one of the partitions held (leases), nobody over the
// share, and every lease of the node's id one it serves.
func settled(id string, partitions, share, serving, leases int, held map[string]int) bool {
	if leases < partitions || held[id] != serving {
		return false
	}
	for holder, k := range held {
		if holder != id && k > share {
			return false
		}
	}
	return true
}
