package bus

import (
	"sync"
)

// tenantState is what the bus keeps per tenant besides its tasks' shards:
// how many tasks it has in memory, and its tasks in listing order.
//
// Lock order: Bus.pause, then a shard's mu, then a tenant's mu (or
// openPings.mu). Readers that start from a tenant's list (List) copy the
// task pointers they need under mu, release it, then take each task's
// shard lock.
type tenantState struct {
	tasks spreadCount // in memory

	mu   sync.Mutex
	list taskList
}

// tenant returns a tenant's state, made on first use.
func (b *Bus) tenant(name string) *tenantState {
	if ts, ok := b.tenants.Load(name); ok {
		return ts.(*tenantState)
	}
	ts, _ := b.tenants.LoadOrStore(name, new(tenantState))
	return ts.(*tenantState)
}

// knownTenant returns a tenant's state, or nil if it never had a task.
func (b *Bus) knownTenant(name string) *tenantState {
	if ts, ok := b.tenants.Load(name); ok {
		return ts.(*tenantState)
	}
	return nil
}

// tenantTasks returns the counter of a tenant's tasks in memory.
func (b *Bus) tenantTasks(tenant string) *spreadCount { return &b.tenant(tenant).tasks }

// tenantLimit is how many tasks a tenant may have in memory.
func (b *Bus) tenantLimit(tenant string) int {
	if n, ok := b.opts.TenantTasks[tenant]; ok && n > 0 {
		return n
	}
	return b.opts.TenantMaxTasks
}

// addTask puts a new task into memory: its shard (s, under hash h, whose
// lock the caller holds), its tenant's count and list. The task's key and
// createdAt are set and do not change afterwards.
func (b *Bus) addTask(s *shard, h uint64, t *task) {
	t.shard = uint8(h % numShards)
	s.put(h, t)
	b.ntasks.Add(t.shard, 1)
	ts := b.tenant(t.tenant)
	ts.tasks.Add(t.shard, 1)
	ts.mu.Lock()
	ts.list.insert(t)
	t.listed = true
	ts.mu.Unlock()
}

// dropTask takes a task out of memory, undoing addTask; it also leaves the
// open ping runs if it was one. The caller holds the shard's lock.
func (b *Bus) dropTask(s *shard, h uint64, t *task) {
	s.del(h, t)
	b.ntasks.Add(t.shard, -1)
	ts := b.tenant(t.tenant)
	ts.tasks.Add(t.shard, -1)
	ts.mu.Lock()
	ts.list.remove(t)
	t.listed = false
	ts.mu.Unlock()
	b.pings.remove(t)
}
