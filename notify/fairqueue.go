package notify

import "sync"

// fairQueue holds what waits in one lane: a queue of each tenant's own,
// taken from in turn. A channel shared by tenants (tenants: ["*"]) is one
// lane, and one queue in arrival order let a tenant's storm (a BY: name
// rule over thousands of failing jobs) fill it, so that another tenant's
// notification was dropped as "queue full" or waited behind all of it.
// Here each tenant may hold up to bound notifications, so a storm only
// ever overflows its own queue, and the lane takes one of each tenant's in
// turn, so another tenant's notification goes out after at most one of
// every other tenant's. Within a tenant the order is the order of Send.
//
// Besides, the channel holds at most total notifications of all tenants
// together, so that its memory does not grow with the number of tenants
// (bound each). Past it the tenant with the longest queue overflows: its
// newest is dropped to make room for a tenant whose queue is shorter by
// two or more; otherwise the new one is dropped. A tenant with a short
// queue never loses one for another's storm.
//
// What a process that stopped owed (requeue), and what a lane took and
// put back, waits ahead of the tenant's queue. It is never dropped for
// want of room when it comes (it was promised at least once: a lane owes
// up to a digest batch besides a full queue when its process dies), but
// it takes its tenant's room, and the channel's, like anything waiting:
// while it fills the tenant's queue, the tenant's new notifications are
// dropped. Before, it counted in neither bound, and each restart during
// an outage added a full queue to what the next one owed. Past the
// total, the longest queue's newest goes first, fresh or owed, so that
// what one tenant owes never crowds out another tenant's.
type fairQueue struct {
	bound int // what each tenant has waiting
	total int // what every tenant has waiting, together

	mu      sync.Mutex
	tenants map[string]*tenantQueue // only tenants with something waiting
	turns   []string                // those tenants, in the order of their turns
	n       int                     // every notification waiting: total bounds it

	// wake tells the lane that something was added.
	wake chan struct{}
}

// tenantQueue is what one tenant has waiting: owed first, then fresh.
type tenantQueue struct {
	owed  []item
	fresh []item
}

func (tq *tenantQueue) len() int { return len(tq.owed) + len(tq.fresh) }

// cutNewest removes and returns the newest of what tq holds: its last
// fresh notification, or, with none, the last it owes.
func (tq *tenantQueue) cutNewest() item {
	from := &tq.fresh
	if len(tq.fresh) == 0 {
		from = &tq.owed
	}
	last := len(*from) - 1
	out := (*from)[last]
	(*from)[last] = item{}
	*from = (*from)[:last]
	return out
}

func newFairQueue(bound, total int) *fairQueue {
	return &fairQueue{bound: bound, total: max(total, bound), tenants: map[string]*tenantQueue{}, wake: make(chan struct{}, 1)}
}

// Why push drops a notification.
const (
	whyQueueFull   = "queue full"
	whyChannelFull = "channel queue full: the longest tenant queue overflows first"
)

// push adds it to its tenant's queue, unless that holds bound already
// (owed and fresh), or the channel holds total and no other tenant's
// queue is longer. It says whether it was kept, and what was dropped
// (nil: nothing) and why: it, or, when kept past the total, the newest of
// the longest queue.
func (q *fairQueue) push(it item) (kept bool, dropped *item, why string) {
	q.mu.Lock()
	defer func() {
		q.mu.Unlock()
		if kept {
			q.signal()
		}
	}()
	tenant := it.n.Alert.Tenant
	var have int
	if tq := q.tenants[tenant]; tq != nil {
		have = tq.len()
	}
	if have >= q.bound {
		return false, &it, whyQueueFull
	}
	if q.n >= q.total {
		longest := q.longest()
		// Cut only a queue that stays at least as long as the new one's:
		// otherwise the lengths just trade places.
		if longest == nil || longest.len() <= have+1 {
			return false, &it, whyChannelFull
		}
		out := longest.cutNewest()
		q.n--
		dropped, why = &out, whyChannelFull
		// longest keeps at least have+1 >= 1: it stays in the turns.
	}
	tq := q.tenant(tenant)
	tq.fresh = append(tq.fresh, it)
	q.n++
	return true, dropped, why
}

// longest is the queue of the tenant with the most notifications
// waiting. It looks at every tenant that has something waiting, which
// the total bounds; it runs only while the channel is at its total. The
// caller holds mu.
func (q *fairQueue) longest() *tenantQueue {
	var l *tenantQueue
	for _, tq := range q.tenants {
		if l == nil || tq.len() > l.len() {
			l = tq
		}
	}
	return l
}

// requeue adds what a process that stopped owed, ahead of each tenant's
// queue, past its bound if need be: it takes the tenant's room from then
// on.
func (q *fairQueue) requeue(its []item) {
	if len(its) == 0 {
		return
	}
	q.mu.Lock()
	for _, it := range its {
		tq := q.tenant(it.n.Alert.Tenant)
		tq.owed = append(tq.owed, it)
	}
	q.n += len(its)
	q.mu.Unlock()
	q.signal()
}

// putBack returns what a lane took but did not send (a digest carries only
// so many: DigestCarrier) ahead of each tenant's queue, in the order taken,
// past the bound like what was owed (it was taken in already), and in its
// tenant's room from then on. A tenant
// that had nothing left waiting takes its turn first again.
func (q *fairQueue) putBack(its []item) {
	if len(its) == 0 {
		return
	}
	q.mu.Lock()
	back := map[string][]item{}
	var first []string
	for _, it := range its {
		t := it.n.Alert.Tenant
		if _, ok := back[t]; !ok && q.tenants[t] == nil {
			first = append(first, t)
		}
		back[t] = append(back[t], it)
	}
	for t, b := range back {
		tq := q.tenants[t]
		if tq == nil {
			tq = &tenantQueue{}
			q.tenants[t] = tq
		}
		tq.owed = append(b, tq.owed...)
	}
	q.turns = append(first, q.turns...)
	q.n += len(its)
	q.mu.Unlock()
	q.signal()
}

// tenant returns tenant's queue, making it (and giving it the last turn)
// when it has nothing waiting. The caller holds mu and adds to it.
func (q *fairQueue) tenant(tenant string) *tenantQueue {
	tq := q.tenants[tenant]
	if tq == nil {
		tq = &tenantQueue{}
		q.tenants[tenant] = tq
		q.turns = append(q.turns, tenant)
	}
	return tq
}

func (q *fairQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take takes up to max notifications, one of each tenant's in turn.
func (q *fairQueue) take(max int) []item {
	q.mu.Lock()
	defer q.mu.Unlock()
	var its []item
	for len(its) < max && len(q.turns) > 0 {
		tenant := q.turns[0]
		tq := q.tenants[tenant]
		if len(tq.owed) > 0 {
			its = append(its, tq.owed[0])
			tq.owed[0] = item{}
			tq.owed = tq.owed[1:]
		} else {
			its = append(its, tq.fresh[0])
			tq.fresh[0] = item{}
			tq.fresh = tq.fresh[1:]
		}
		q.n--
		q.turns = q.turns[1:]
		if tq.len() > 0 {
			q.turns = append(q.turns, tenant)
		} else {
			delete(q.tenants, tenant) // a tenant seen once holds no memory
		}
	}
	if len(q.turns) == 0 {
		q.turns = nil // let the array the turns moved along go
	}
	return its
}

// len is how many notifications wait.
func (q *fairQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}
