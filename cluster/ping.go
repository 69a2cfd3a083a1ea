package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// Pings in the scale-out mode. A ping run may live in any partition (its
// ID holds the time of its start), so the open run of a job is asked of
// every partition's owner, on apollo.rpc.list as a listing is; each owner
// answers from its bus's index of open runs, at a cost that does not grow
// with its tasks. Owners apply an event after JetStream has stored it, so
// the start of a run that ends at once may not have reached its owner
// when the end comes: the node remembers the last start it sent for each
// job until an end pairs with it or its owner shows it closed.

// startTrust is how long a start the node sent, unknown to its owner, is
// taken to be on its way rather than gone: long past any apply delay,
// far short of the retention after which a finished run leaves memory.
const startTrust = time.Minute

// maxRecentStarts bounds the starts a node remembers; past it a start is
// found by asking the owners once they have applied it.
const maxRecentStarts = 100_000

// recentStarts are the last ping starts this node published, by tenant
// and job.
type recentStarts struct {
	mu   sync.Mutex
	runs map[[2]string]recentStart
}

type recentStart struct {
	taskID string
	sent   time.Time
}

func (r *recentStarts) get(k [2]string) (recentStart, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.runs[k]
	return s, ok
}

func (r *recentStarts) put(k [2]string, s recentStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs == nil {
		r.runs = map[[2]string]recentStart{}
	}
	if _, ok := r.runs[k]; ok || len(r.runs) < maxRecentStarts {
		r.runs[k] = s
	}
}

// forget drops the start of k if it is still taskID.
func (r *recentStarts) forget(k [2]string, taskID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runs[k].taskID == taskID {
		delete(r.runs, k)
	}
}

// Ping publishes the event of one ping, paired with the job's open run
// (apollo.Ping.Event), as bus.Bus.Ping does on one server.
func (n *Node) Ping(ctx context.Context, p apollo.Ping) (apollo.Event, bus.Outcome, error) {
	k := [2]string{p.Tenant, p.Job}
	var open apollo.OpenRun
	ok := false
	if p.Status != apollo.StatusRunning {
		var err error
		if open, ok, err = n.openPing(ctx, p.Tenant, p.Job); err != nil {
			// Some owner did not answer (a takeover, or too busy): its
			// partitions may hold the open run. Taken as a run of its own,
			// the end would leave that run running until its timeout told
			// of it.
			why, hint := unavailable(err, "resend the ping in a few seconds")
			return p.Event(open, false), bus.Outcome{Result: bus.RetryLater, Err: &apollo.Error{Code: apollo.EUNAVAILABLE,
				Message: "the job's open run cannot be looked for now: " + why, Hint: hint}}, nil
		}
	}
	ev := p.Event(open, ok)
	var out [1]bus.Outcome
	if err := n.Publish(ctx, []apollo.Event{ev}, out[:]); err != nil {
		return ev, out[0], err
	}
	switch taken := out[0].Result == bus.Accepted; {
	case p.Status == apollo.StatusRunning && taken:
		n.starts.put(k, recentStart{taskID: ev.TaskID, sent: n.opts.Clock.Now()})
	case ok && taken:
		n.starts.forget(k, open.TaskID)
	}
	return ev, out[0], nil
}

// openPing finds the open run of a job: the last start this node sent if
// it is still open or not yet applied, else the newest open run any owner
// has. An owner that does not answer is an error: the caller cannot tell
// whether the job has an open run.
func (n *Node) openPing(ctx context.Context, tenant, job string) (apollo.OpenRun, bool, error) {
	k := [2]string{tenant, job}
	if s, ok := n.starts.get(k); ok {
		t, err := n.Get(tenant, s.taskID)
		switch {
		case err == nil && t.Status == apollo.StatusRunning:
			return apollo.OpenRun{TaskID: t.TaskID, Sequence: t.Sequence, CreatedAt: t.CreatedAt}, true, nil
		case apollo.ErrorCode(err) == apollo.ENOTFOUND && n.opts.Clock.Now().Sub(s.sent) < startTrust:
			return apollo.OpenRun{TaskID: s.taskID, Sequence: 1}, true, nil // on its way to its owner
		case err == nil || apollo.ErrorCode(err) == apollo.ENOTFOUND:
			n.starts.forget(k, s.taskID) // closed, or lost
		}
	}
	var best *apollo.OpenRun
	err := n.askAll(rpcRequest{Op: "openping", Tenant: tenant, Job: job}, func(r *rpcReply) {
		if r.Open != nil && (best == nil || r.Open.Newer(*best)) {
			best = r.Open
		}
	})
	if err != nil {
		n.warn("finding the open run of a ping failed; the ping is answered retry_later", "job", job, "err", err)
		return apollo.OpenRun{}, false, err
	}
	if best == nil {
		return apollo.OpenRun{}, false, nil
	}
	return *best, true, nil
}
