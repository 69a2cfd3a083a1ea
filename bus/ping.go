package bus

import (
	"context"
	"slices"
	"sync"

	"github.com/apollo-11/apollo"
)

// Ping pairing (apollo.Ping has the rules). The bus keeps, for each tenant
// and job, its ping runs that are running, and changes that set as the
// runs change, under their shard locks: a task enters when it becomes
// running and leaves when it stops or leaves memory. Replay and snapshot
// restore rebuild the set the same way, so an end after a restart still
// finds its start, and finding it costs a map lookup however many tasks
// are in memory (it used to be a scan of them all, issue 20.1).

// openPings holds the ping runs that are running, by tenant and job.
type openPings struct {
	mu   sync.Mutex
	runs map[jobKey][]*task // usually one per job; more while runs overlap

	// stripes make the pings of one job (by hash) one at a time, from the
	// lookup of its open run to the decision on the event, so that two
	// ends at once do not both pair with the same start. Pings of other
	// jobs do not wait, and no lock is held while the log syncs.
	stripes [64]sync.Mutex
}

type jobKey struct{ tenant, job string }

// track puts t in the set or takes it out after its status changed; the
// caller holds t's shard lock.
func (p *openPings) track(t *task) {
	switch {
	case t.status == apollo.StatusRunning && t.listed && !t.pingOpen && apollo.IsPingRun(t.id, t.name):
		k := jobKey{t.tenant, t.name}
		p.mu.Lock()
		if p.runs == nil {
			p.runs = map[jobKey][]*task{}
		}
		p.runs[k] = append(p.runs[k], t)
		t.pingOpen = true
		p.mu.Unlock()
	case t.status != apollo.StatusRunning:
		p.remove(t)
	}
}

// remove takes t out of the set if it is there; the caller holds t's
// shard lock.
func (p *openPings) remove(t *task) {
	if !t.pingOpen {
		return
	}
	k := jobKey{t.tenant, t.name}
	p.mu.Lock()
	runs := slices.DeleteFunc(p.runs[k], func(o *task) bool { return o == t })
	if len(runs) == 0 {
		delete(p.runs, k)
	} else {
		p.runs[k] = runs
	}
	t.pingOpen = false
	p.mu.Unlock()
}

// newest returns the job's open run that comes first in the listing, or
// nil. Its key fields never change; the rest needs its shard lock.
func (p *openPings) newest(tenant, job string) *task {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *task
	for _, t := range p.runs[jobKey{tenant, job}] {
		if best == nil || t.listKey().before(best.listKey()) {
			best = t
		}
	}
	return best
}

// OpenPing returns the job's newest ping run that is still running, if it
// has one in memory.
func (b *Bus) OpenPing(tenant, job string) (apollo.OpenRun, bool) {
	for range 8 { // each miss means that run left the set meanwhile
		t := b.pings.newest(tenant, job)
		if t == nil {
			break
		}
		s := &b.shards[t.shard]
		s.mu.Lock()
		run, open := apollo.OpenRun{TaskID: t.id, Sequence: t.seq, CreatedAt: t.createdAt}, t.pingOpen
		s.mu.Unlock()
		if open {
			return run, true
		}
	}
	return apollo.OpenRun{}, false
}

// Ping decides the event one ping reports, paired with the job's open run
// (apollo.Ping.Event), and returns it with its outcome once it is durable.
// An error means the log failed, as for Publish.
func (b *Bus) Ping(ctx context.Context, p apollo.Ping) (apollo.Event, Outcome, error) {
	mu := &b.pings.stripes[hashParts(p.Tenant, p.Job)%uint64(len(b.pings.stripes))]
	mu.Lock()
	var open apollo.OpenRun
	ok := false
	if p.Status != apollo.StatusRunning {
		open, ok = b.OpenPing(p.Tenant, p.Job)
	}
	evs := []apollo.Event{p.Event(open, ok)}
	var out [1]Outcome
	last, refusals := b.decideAll(evs, out[:], false)
	mu.Unlock()
	b.reportRefusals(refusals)
	return evs[0], out[0], b.waitLog(ctx, last)
}
