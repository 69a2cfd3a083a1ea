package cluster

import (
	"cmp"
	"slices"
	"time"
)

// openRetryMax bounds the wait before this node claims again a partition
// it failed to rebuild. A failure that lasts (a decision log message this
// build cannot read, written by a newer owner or damaged) is then tried
// once a minute, not at every round; one that passes (NATS slow during
// the replay) costs at most that.
const openRetryMax = time.Minute

// openFailure is one episode of failed rebuilds of a partition on this
// node: from its first failure to its next success. The node does not
// claim the partition before retryAt; other nodes may meanwhile, since
// its lease is given up at each failure.
type openFailure struct {
	attempts int
	since    time.Time // the episode's first failure
	retryAt  time.Time
	err      error // the last
}

// OpenFailure is a partition this node failed to rebuild, and when it
// will claim it again (NodeStats.OpenFailures).
type OpenFailure struct {
	Partition int       `json:"partition"`
	Attempts  int       `json:"attempts"` // failed rebuilds in a row
	Since     time.Time `json:"since"`    // the first of them
	RetryAt   time.Time `json:"retry_at"` // not claimed by this node before
	Error     string    `json:"error"`    // the last one's
}

// openFailed records that rebuilding partition p failed: the node waits
// RenewEvery, doubled at each failure in a row up to openRetryMax, before
// claiming it again. The episode's first failure is logged, at ERROR,
// with what to do; the later ones are counted (NodeStats), not logged:
// each round's ERROR line flooded the log. Before, the lease was claimed
// again at once (its delete woke the keeper), failed again, and so on
// without pause (TestBusNodePartitionThatCannotBeRebuiltIsRetriedLessAndLess).
func (n *Node) openFailed(p int, err error) {
	now := n.opts.Clock.Now()
	n.mu.Lock()
	f := n.openFails[p]
	first := f == nil
	if first {
		f = &openFailure{since: now}
		n.openFails[p] = f
	}
	f.attempts++
	f.err = err
	wait := min(n.opts.RenewEvery<<min(f.attempts-1, 30), max(openRetryMax, n.opts.RenewEvery))
	f.retryAt = now.Add(wait)
	attempts := f.attempts
	n.mu.Unlock()
	if first {
		n.log.Error("a partition cannot be rebuilt on this node; it is given up and claimed again later, less and less often (see cluster.open_failures in GET /api/v1/system)",
			"partition", p, "err", err, "retry_in", wait,
			"hint", "a decision log message this node cannot read: if the other nodes run a newer build, upgrade this one; if it is damaged, see docs/scale-out.md, \"A partition that cannot be rebuilt\"")
	} else {
		n.log.Debug("a partition still cannot be rebuilt on this node", "partition", p, "attempts", attempts, "err", err, "retry_in", wait)
	}
}

// openSucceeded ends partition p's episode of failed rebuilds, if any.
func (n *Node) openSucceeded(p int) {
	n.mu.Lock()
	f := n.openFails[p]
	delete(n.openFails, p)
	n.mu.Unlock()
	if f != nil {
		n.log.Info("a partition that could not be rebuilt was rebuilt", "partition", p, "failed_attempts", f.attempts,
			"since", f.since)
	}
}

// backingOff reports whether this node waits before claiming p again.
// n.mu is held.
func (n *Node) backingOff(p int, now time.Time) bool {
	f := n.openFails[p]
	return f != nil && now.Before(f.retryAt)
}

// openFailures lists the partitions in an episode of failed rebuilds, in
// partition order.
// n.mu is held.
func (n *Node) openFailures() []OpenFailure {
	out := []OpenFailure{}
	for p, f := range n.openFails {
		out = append(out, OpenFailure{Partition: p, Attempts: f.attempts, Since: f.since, RetryAt: f.retryAt, Error: f.err.Error()})
	}
	slices.SortFunc(out, func(a, b OpenFailure) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}
