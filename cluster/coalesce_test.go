package cluster

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
)

// ackGate holds back JetStream's answers to a node's events messages: once
// armed, the first answer blocks the publisher's goroutine, and with it
// every answer after it, until open.
type ackGate struct {
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{} // closed when the first answer is held
	queue   chan struct{} // a request's events for a subject were queued
	release chan struct{}
	opened  sync.Once
}

func newAckGate() *ackGate {
	return &ackGate{held: make(chan struct{}), release: make(chan struct{}), queue: make(chan struct{}, 64)}
}

func (g *ackGate) hook() {
	if !g.armed.Load() {
		return
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.held)
		<-g.release
	}
}

func (g *ackGate) open() { g.opened.Do(func() { close(g.release) }) }

func (g *ackGate) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no answer from JetStream came to be held")
	}
}

func (g *ackGate) queued() { g.queue <- struct{}{} }

// sendBehind publishes the first request and holds JetStream's answer
// back, queues the others behind its messages one after the other, lets
// the answers go, and checks that every event is accepted. Each request
// has events for both tenants' subjects.
func sendBehind(t *testing.T, gate *ackGate, n *testNode, first []apollo.Event, then ...[]apollo.Event) {
	t.Helper()
	outs := []<-chan []bus.Outcome{publishing(context.Background(), n, first)}
	gate.waitHeld(t)
	for _, evs := range then {
		outs = append(outs, publishing(context.Background(), n, evs))
		gate.waitQueued(t, 2) // one part per tenant
	}
	gate.open()
	for i, evs := range append([][]apollo.Event{first}, then...) {
		wantAll(t, fmt.Sprintf("request %d", i+1), evs, outcomes(t, outs[i]), bus.Accepted)
	}
}

// gatedNode starts a cluster of one partition and a node whose JetStream
// answers to events messages go through a gate; the node serves the
// partition if claim is set.
func gatedNode(t *testing.T, id string, timeout time.Duration, claim bool) (*testCluster, *ackGate, *testNode) {
	t.Helper()
	c := newTestCluster(t, 1, 3*time.Second)
	gate := newAckGate()
	n := c.startWith(id, func(o *Options) {
		o.testAckHook, o.testQueuedHook = gate.hook, gate.queued
		o.PublishTimeout = timeout
		o.testNoClaim = !claim
	})
	t.Cleanup(gate.open) // before the node stops
	if claim {
		c.waitServed(nil)
	}
	return c, gate, n
}

// waitQueued waits until k parts of requests wait for a message in flight.
func (g *ackGate) waitQueued(t *testing.T, k int) {
	t.Helper()
	deadline := time.NewTimer(testwait.Timeout(t))
	defer deadline.Stop()
	for k > 0 {
		select {
		case <-g.queue:
			k--
		case <-deadline.C:
			t.Fatalf("%d more parts of requests were to queue", k)
		}
	}
}

// publishing publishes evs on another goroutine; the channel gives the
// outcomes.
func publishing(ctx context.Context, n *testNode, evs []apollo.Event) <-chan []bus.Outcome {
	done := make(chan []bus.Outcome, 1)
	go func() {
		out := make([]bus.Outcome, len(evs))
		if err := n.Publish(ctx, evs, out); err != nil {
			panic(err)
		}
		done <- out
	}()
	return done
}

func outcomes(t *testing.T, c <-chan []bus.Outcome) []bus.Outcome {
	t.Helper()
	select {
	case out := <-c:
		return out
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("a request was not answered")
		return nil
	}
}

func wantAll(t *testing.T, what string, evs []apollo.Event, out []bus.Outcome, want bus.Result) {
	t.Helper()
	for i, o := range out {
		if o.Result != want {
			t.Errorf("%s: event %q/%s:%d: %s (%v), want %s", what, evs[i].Tenant, evs[i].TaskID, evs[i].Sequence, o.Result, o.Err, want)
		}
	}
}

// runEvents are events of sequence seq for each task in both tenants.
func runEvents(seq int64, ids ...string) []apollo.Event {
	st := []apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess}[seq-1]
	base := time.Now().Add(-time.Minute).UnixMilli()
	var evs []apollo.Event
	for _, tenant := range []string{"", "acme"} {
		for _, id := range ids {
			evs = append(evs, apollo.Event{Tenant: tenant, TaskID: id, Name: "co", Sequence: seq, Status: st, Ts: base + seq})
		}
	}
	return evs
}

// storedMsg is one message of the events stream, decoded.
type storedMsg struct {
	subject string
	msgID   string
	evs     []apollo.Event
}

// storedMsgs reads the whole events stream.
func storedMsgs(t *testing.T, nc *nats.Conn) []storedMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(t))
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []storedMsg
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(testwait.Timeout(t)))
		if err != nil {
			t.Fatal(err)
		}
		tenant, _, err := parseEventSubject(m.Subject())
		if err != nil {
			t.Fatal(err)
		}
		sm := storedMsg{subject: m.Subject(), msgID: m.Headers().Get(jetstream.MsgIDHeader)}
		if err := decodeBatch(m.Data(), func(ev apollo.Event) {
			ev.Tenant = tenant
			sm.evs = append(sm.evs, ev)
		}, noPass(t)); err != nil {
			t.Fatalf("message on %s: %v", m.Subject(), err)
		}
		msgs = append(msgs, sm)
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if md.Sequence.Stream >= info.State.LastSeq {
			return msgs
		}
	}
}

// keys names events as tenant/task:sequence, in order.
func keys(evs []apollo.Event) []string {
	var k []string
	for _, ev := range evs {
		k = append(k, fmt.Sprintf("%s/%s:%d", ev.Tenant, ev.TaskID, ev.Sequence))
	}
	return k
}

func ofTenant(evs []apollo.Event, tenant string) []apollo.Event {
	var r []apollo.Event
	for _, ev := range evs {
		if ev.Tenant == tenant {
			r = append(r, ev)
		}
	}
	return r
}

// waitChanges waits until count changes of task id to sequence seq were
// published (one per tenant, when both tenants have the task).
func waitChanges(t *testing.T, cl *changeLog, id string, seq int64, count int) {
	t.Helper()
	deadline := time.NewTimer(testwait.Timeout(t))
	defer deadline.Stop()
	for {
		cl.mu.Lock()
		k := 0
		for _, c := range cl.byTask[id] {
			if c.Record.Sequence == seq {
				k++
			}
		}
		cl.mu.Unlock()
		if k >= count {
			return
		}
		select {
		case <-cl.signal:
		case <-deadline.C:
			t.Fatalf("%d of %d changes of %s to sequence %d", k, count, id, seq)
		}
	}
}

// Requests for the same subjects while a message is in flight wait, and
// then go as one message per subject, in the order they came; each event
// is answered from the message holding it, and the owner applies every
// task's events in order, in each tenant apart.
func TestConcurrentRequestsShareAMessage(t *testing.T) {
	c, gate, n := gatedNode(t, "co-1", testwait.Timeout(t), true)
	changes := recordChanges(t, connect(t, c.srv))

	gate.armed.Store(true)
	first := runEvents(1, "a", "b")
	second := runEvents(2, "a", "b")
	third := runEvents(3, "a", "b")
	sendBehind(t, gate, n, first, second, third)

	msgs := storedMsgs(t, n.nc)
	for _, tenant := range []string{"", "acme"} {
		subj := EventSubject(tenant, 0)
		var got [][]string
		for _, m := range msgs {
			if m.subject == subj {
				got = append(got, keys(m.evs))
			}
		}
		want := [][]string{
			keys(ofTenant(first, tenant)),
			append(keys(ofTenant(second, tenant)), keys(ofTenant(third, tenant))...),
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tenant %q: messages stored\n%v\nwant\n%v", tenant, got, want)
		}
	}
	for _, id := range []string{"a", "b"} {
		waitChanges(t, changes, id, 3, 2)
		for _, tenant := range []string{"", "acme"} {
			task, err := n.Get(tenant, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != apollo.StatusSuccess || len(task.History) != 3 {
				t.Errorf("tenant %q task %s: %s with %d history entries, want success after 3", tenant, id, task.Status, len(task.History))
			}
		}
	}
}

// A request whose time runs out while its events wait for a message in
// flight is answered retry_later, as is the one whose message's answer
// came too late.
func TestQueuedRequestTimesOut(t *testing.T) {
	timeout := time.Second
	if raceEnabled {
		timeout = 3 * time.Second
	}
	_, gate, n := gatedNode(t, "co-2", timeout, false)
	gate.armed.Store(true)
	first := runEvents(1, "g", "h")
	firstOut := publishing(context.Background(), n, first)
	gate.waitHeld(t)
	late := runEvents(2, "g", "h")
	lateOut := publishing(context.Background(), n, late)
	gate.waitQueued(t, 2)
	for _, r := range []struct {
		name string
		evs  []apollo.Event
		out  []bus.Outcome
	}{{"first", first, outcomes(t, firstOut)}, {"late", late, outcomes(t, lateOut)}} {
		wantAll(t, r.name, r.evs, r.out, bus.RetryLater)
		for i, o := range r.out {
			if o.Err == nil || o.Err.Message != "JetStream did not answer in time" {
				t.Errorf("%s event %d: %v", r.name, i, o.Err)
			}
		}
	}
	gate.open()
	wantAll(t, "resent", late, outcomes(t, publishing(context.Background(), n, late)), bus.Accepted)
}

// A request whose caller goes away while its events wait for a message in
// flight is answered retry_later, and its events are not sent: the next
// message holds only the events of the requests still waiting.
func TestCancelledRequestIsNotSent(t *testing.T) {
	_, gate, n := gatedNode(t, "co-3", testwait.Timeout(t), false)
	gate.armed.Store(true)
	first := runEvents(1, "g", "h")
	firstOut := publishing(context.Background(), n, first)
	gate.waitHeld(t)

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := runEvents(2, "g", "h")
	cancelledOut := publishing(ctx, n, cancelled)
	gate.waitQueued(t, 2)
	kept := runEvents(1, "k", "l")
	keptOut := publishing(context.Background(), n, kept)
	gate.waitQueued(t, 2)
	cancel()
	wantAll(t, "cancelled", cancelled, outcomes(t, cancelledOut), bus.RetryLater)
	gate.open()
	wantAll(t, "first", first, outcomes(t, firstOut), bus.Accepted)
	wantAll(t, "kept", kept, outcomes(t, keptOut), bus.Accepted)

	msgs := storedMsgs(t, n.nc)
	for _, tenant := range []string{"", "acme"} {
		var got []string
		for _, m := range msgs {
			if m.subject == EventSubject(tenant, 0) {
				got = append(got, fmt.Sprint(keys(m.evs)))
			}
		}
		want := []string{fmt.Sprint(keys(ofTenant(first, tenant))), fmt.Sprint(keys(ofTenant(kept, tenant)))}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("tenant %q: messages stored %v, want %v", tenant, got, want)
		}
	}
}

// A request sent alone and resent alone is a duplicate (its message has
// the same ID). A request whose events went out with another's is stored
// again when resent and answered accepted; the owner drops the copies as
// duplicates, and each task keeps its one event.
func TestResentRequest(t *testing.T) {
	c, gate, n := gatedNode(t, "co-5", testwait.Timeout(t), true)
	changes := recordChanges(t, connect(t, c.srv))

	alone := runEvents(1, "alone-1", "alone-2")
	wantAll(t, "alone", alone, outcomes(t, publishing(context.Background(), n, alone)), bus.Accepted)
	wantAll(t, "alone, resent", alone, outcomes(t, publishing(context.Background(), n, alone)), bus.Duplicate)

	gate.armed.Store(true)
	ahead := runEvents(1, "ahead")
	shared := runEvents(1, "shared")
	sendBehind(t, gate, n, ahead, shared, runEvents(1, "other"))
	wantAll(t, "shared, resent", shared, outcomes(t, publishing(context.Background(), n, shared)), bus.Accepted)

	// The owner reads the partition in stream order: once the sentinel is
	// applied, so is the resent copy.
	sentinel := runEvents(1, "sentinel")
	wantAll(t, "sentinel", sentinel, outcomes(t, publishing(context.Background(), n, sentinel)), bus.Accepted)
	waitChanges(t, changes, "sentinel", 1, 2)
	dup := int64(0)
	for _, ps := range n.NodeStats().Partitions {
		dup += ps.Bus.Duplicate
	}
	if dup != int64(len(shared)) {
		t.Errorf("the owner dropped %d duplicates, want the %d resent events", dup, len(shared))
	}
	for _, tenant := range []string{"", "acme"} {
		task, err := n.Get(tenant, "shared")
		if err != nil {
			t.Fatal(err)
		}
		if len(task.History) != 1 {
			t.Errorf("tenant %q: the resent task has history %+v", tenant, task.History)
		}
	}
	stored := 0
	for _, m := range storedMsgs(t, n.nc) {
		for _, ev := range m.evs {
			if ev.TaskID == "alone-1" {
				stored++
			}
		}
	}
	if stored != 2 {
		t.Errorf("alone-1 is stored %d times, want once per tenant", stored)
	}
}

// Many requests at once, in both tenants, over two partitions: every
// event is answered accepted and stored once, and each task's events are
// stored in the order its requests were sent (one request holding two
// events of a task, then one with the third).
func TestConcurrentRequestsKeepOrder(t *testing.T) {
	const parts, workers, rounds, tasks = 2, 8, 10, 6
	c := newTestCluster(t, parts, 3*time.Second)
	n := c.startWith("co-4", func(o *Options) { o.testNoClaim = true })
	var wg sync.WaitGroup
	requests := atomic.Int64{}
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				var ids []string
				for k := range tasks {
					ids = append(ids, fmt.Sprintf("o-%d-%d-%d", w, r, k))
				}
				// Sequences 1 and 2 of each task in one request, in
				// order, then 3 in the next.
				var one []apollo.Event
				for k := range ids {
					one = append(one, runEvents(1, ids[k])...)
					one = append(one, runEvents(2, ids[k])...)
				}
				for _, evs := range [][]apollo.Event{one, runEvents(3, ids...)} {
					out := make([]bus.Outcome, len(evs))
					if err := n.Publish(context.Background(), evs, out); err != nil {
						t.Error(err)
						return
					}
					requests.Add(1)
					wantAll(t, "request", evs, out, bus.Accepted)
				}
			}
		})
	}
	wg.Wait()
	msgs := storedMsgs(t, n.nc)
	seqs := map[string][]int64{}
	total := 0
	for _, m := range msgs {
		for _, ev := range m.evs {
			k := ev.Tenant + "/" + ev.TaskID
			seqs[k] = append(seqs[k], ev.Sequence)
			total++
		}
	}
	if want := 2 * workers * rounds * tasks; len(seqs) != want {
		t.Errorf("%d tasks stored, want %d", len(seqs), want)
	}
	for k, s := range seqs {
		if !reflect.DeepEqual(s, []int64{1, 2, 3}) {
			t.Errorf("task %s stored as %v, want [1 2 3]", k, s)
		}
	}
	t.Logf("%d events in %d messages from %d requests", total, len(msgs), requests.Load())
}
