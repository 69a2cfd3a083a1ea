package cluster

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/nats-io/nats.go"
)

// A JSON batch of changes (as nodes before the binary form published it)
// reads back in the order it was gathered, with each record's tenant from
// its task, in two tenants; a lone change's JSON (as nodes before batching
// published it) still reads.
func TestChangeBatchReadsBackInOrder(t *testing.T) {
	var data []byte
	data = append(data, changesMagic...)
	var want []apollo.Change
	for i, tenant := range []string{"", "acme", "acme", ""} {
		c := apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "t", Sequence: int64(i + 1), Status: apollo.StatusRunning}},
			Task: apollo.Task{TaskID: "t", Tenant: tenant, Sequence: int64(i + 1), Status: apollo.StatusRunning}}
		js, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		data = binary.AppendUvarint(data, uint64(len(js)))
		data = append(data, js...)
		want = append(want, c)
	}
	var got []*apollo.Change
	if _, err := decodeChanges(data, func(c *apollo.Change) { got = append(got, c) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d changes, want %d", len(got), len(want))
	}
	for i, c := range got {
		if c.Record.Sequence != want[i].Record.Sequence || c.Record.Tenant != want[i].Task.Tenant || c.Task.Tenant != want[i].Task.Tenant {
			t.Errorf("change %d: record %+v task tenant %q; want sequence %d, tenant %q", i, c.Record, c.Task.Tenant, want[i].Record.Sequence, want[i].Task.Tenant)
		}
	}
	one, _ := json.Marshal(&want[1])
	got = nil
	if _, err := decodeChanges(one, func(c *apollo.Change) { got = append(got, c) }); err != nil || len(got) != 1 || got[0].Record.Tenant != "acme" {
		t.Errorf("a lone change: %v %+v", err, got)
	}
	if _, err := decodeChanges(append([]byte(changesMagic), 0x7f, '{'), func(*apollo.Change) {}); err == nil {
		t.Error("a cut batch was read")
	}
}

// FuzzDecodeChanges: the decoder of what any publisher on apollo.changes.>
// sent, in any of the forms, never panics; what it reads from the binary
// form writes back to the same changes (so has no status or kind without
// a name: those it passes over).
func FuzzDecodeChanges(f *testing.F) {
	f.Add([]byte(`{"Record":{},"Task":{"taskID":"x","tenant":"a"}}`))
	f.Add(append([]byte(changesMagic), 2, '{', '}'))
	f.Add([]byte(changesMagic + "\xff\xff\xff\xff\x0f"))
	f.Add(binBatch(f, fillChange(f), apollo.Change{}))
	f.Add([]byte(changesBinMagic + "\x01x\x00\x02\x07pending"))
	f.Add([]byte(changesBinMagic + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	newer, _ := newerBatch(f)
	f.Add(newer)
	f.Fuzz(func(t *testing.T, data []byte) {
		var got []apollo.Change
		decodeChanges(data, func(c *apollo.Change) {
			if c.Record.Tenant != c.Task.Tenant {
				t.Fatalf("record tenant %q, task tenant %q", c.Record.Tenant, c.Task.Tenant)
			}
			got = append(got, *c)
		})
		if len(got) == 0 || !hasMagic(data, changesBinMagic) {
			return
		}
		if again := readChanges(t, binBatch(t, got...)); !reflect.DeepEqual(again, got) {
			t.Fatalf("read %+v, wrote it back, read %+v", got, again)
		}
	})
}

// A message of changes that cannot be read is changes lost: the node's
// listeners are cut off (a stream hub then resynchronises its clients
// from a snapshot), at most once a cutEvery; what is lost meanwhile is
// owed and cut for by a later message. Two tenants' subjects.
func TestLostChangesCutListeners(t *testing.T) {
	f, nc, pub, clock := newTestFanIn(t)
	listen := func() *bus.Subscription { return listenFanIn(t, f, nc) }
	send := func(tenant string, data []byte) {
		if err := pub.Publish(changeSubject(tenant, 1), data); err != nil {
			t.Fatal(err)
		}
	}
	good := func(id string) []byte {
		return binBatch(t, withTenant(apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: id}}, Task: apollo.Task{TaskID: id}}, "acme"))
	}
	garbage := []byte(changesBinMagic + "\x05cut")
	next := func(sub *bus.Subscription) (*apollo.Change, bool) {
		t.Helper()
		select {
		case c, ok := <-sub.C():
			return c, ok
		case <-time.After(10 * time.Second):
			t.Fatal("nothing came")
			return nil, false
		}
	}

	first := listen()
	send("acme", good("a"))
	if c, ok := next(first); !ok || c.Task.TaskID != "a" {
		t.Fatalf("got %+v, %v; want change a", c, ok)
	}
	send("beta", garbage)
	if c, ok := next(first); ok {
		t.Fatalf("after a message that cannot be read: change %+v, not the end", c)
	}
	if err := first.Err(); !errors.Is(err, ErrChangesLost) {
		t.Fatalf("the cut says %v, want %v", err, ErrChangesLost)
	}

	second := listen()
	send("beta", garbage) // within cutEvery of the cut: owed
	send("acme", good("b"))
	send("acme", good("c"))
	for _, id := range []string{"b", "c"} {
		if c, ok := next(second); !ok || c.Task.TaskID != id {
			t.Fatalf("got %+v, %v; want change %s: cut again within %v", c, ok, id, cutEvery)
		}
	}
	// The owed cut comes at the first message handled once cutEvery has
	// passed: c's, if its handler is still running when the clock moves
	// (it handed c over before it checks for a cut), else d's, after d.
	clock.Advance(cutEvery)
	send("acme", good("d"))
	c, ok := next(second)
	if ok && c.Task.TaskID != "d" {
		t.Fatalf("got change %+v; want d or the end", c)
	}
	if ok {
		if c, ok := next(second); ok {
			t.Fatalf("the owed cut did not come after %v: change %+v", cutEvery, c)
		}
	}
}

// newTestFanIn is a fan-in on a NATS server of its own, on a fake
// clock: nc is its connection, pub another to publish on.
func newTestFanIn(t *testing.T) (f *fanIn, nc, pub *nats.Conn, clock *apollo.FakeClock) {
	s := runNATS(t)
	nc, pub = connect(t, s), connect(t, s)
	clock = apollo.NewFakeClock(time.Unix(1_764_547_200, 0))
	f = newFanIn(nc, clock, func(string, ...any) {})
	t.Cleanup(f.close)
	return f, nc, pub, clock
}

// listenFanIn subscribes to f, once the NATS server has the interest of
// its connection nc.
func listenFanIn(t testing.TB, f *fanIn, nc *nats.Conn) *bus.Subscription {
	t.Helper()
	sub, err := f.subscribe(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the server has the interest
		t.Fatal(err)
	}
	return sub
}

// A partition's new owner after a takeover without a handover publishes
// a resync marker on the partition's subject for no tenant: the node's
// listeners are cut off (its stream's clients take a snapshot, which has
// the changes the owner before made durable and never published). A
// second marker within cutEvery of the cut is owed, and cut for once
// cutEvery has passed with no message after it: a takeover's last marker,
// or the last losses of a quiet cluster, do not wait for traffic.
func TestResyncMarkerCutsListeners(t *testing.T) {
	f, nc, pub, clock := newTestFanIn(t)
	ended := func(sub *bus.Subscription) {
		t.Helper()
		select {
		case c, ok := <-sub.C():
			if ok {
				t.Fatalf("change %+v, not the end", c)
			}
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("the subscription was not cut")
		}
		if err := sub.Err(); !errors.Is(err, ErrChangesLost) {
			t.Fatalf("the cut says %v, want %v", err, ErrChangesLost)
		}
	}
	n := &Node{opts: Options{Conn: pub, NodeID: "taker"}, log: slog.New(slog.DiscardHandler)}
	first := listenFanIn(t, f, nc)
	n.resync(1)
	ended(first)
	second := listenFanIn(t, f, nc)
	n.resync(2) // within cutEvery: owed, its cut waits on the clock
	if !clock.BlockUntil(1, testwait.Timeout(t)) {
		t.Fatal("no timer for the owed cut")
	}
	select {
	case c := <-second.C():
		t.Fatalf("cut again within %v (%+v)", cutEvery, c)
	default:
	}
	clock.Advance(cutEvery)
	ended(second)
}

// A change the binary form cannot carry is left out; when it would have
// opened a batch, no empty message goes out for it, and the next change
// goes alone in its own.
func TestUnencodableChangePublishesNothing(t *testing.T) {
	s := runNATS(t)
	nc, sub := connect(t, s), connect(t, s)
	msgs := make(chan *nats.Msg, 16)
	if _, err := sub.ChanSubscribe(changeSubject("acme", 3), msgs); err != nil {
		t.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}
	cp := newChangePublisher(nc, 3, "n1")
	bad := withTenant(apollo.Change{Task: apollo.Task{TaskID: "bad", Status: apollo.Status(99)}}, "acme")
	good := withTenant(apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "good"}}, Task: apollo.Task{TaskID: "good"}}, "acme")
	cp.Apply(&bad)
	cp.flush()
	cp.Apply(&good)
	cp.close()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		var ids []string
		if _, err := decodeChanges(m.Data, func(c *apollo.Change) { ids = append(ids, c.Task.TaskID) }); err != nil || len(ids) != 1 || ids[0] != "good" {
			t.Fatalf("first message holds %v (%v), want only the good change", ids, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no message for the good change")
	}
	if err := sub.Flush(); err != nil { // anything else published has arrived
		t.Fatal(err)
	}
	select {
	case m := <-msgs:
		t.Fatalf("a second message (%d bytes) was published", len(m.Data))
	default:
	}
}
