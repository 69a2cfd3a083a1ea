package stream

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// TestStreamFlushTimerOnlyWhileDue: the hub arms its flush timer when a
// coalescing group gets a change and not otherwise, so an idle hub never
// wakes up; groups fall due one flush interval after their first change,
// each at its own time.
func TestStreamFlushTimerOnlyWhileDue(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_700_000_000, 0))
	e := newStreamEnv(t, func(o *Options) { o.Clock = clock; o.HeartbeatInterval = -1; o.PingInterval = time.Hour })
	a := e.dial("view-a")
	a.subscribe(sub{"type": "subscribe", "filter": sub{"prefix": "a"}})
	b := e.dial("view-a")
	b.subscribe(sub{"type": "subscribe", "filter": sub{"prefix": "b"}})
	idle := clock.Waiters() // the hub's own and the clients' ping tickers
	e.publish(ev("a", "a1", "a", 1, pending))
	e.waitCursor(1)
	if got := clock.Waiters(); got != idle+1 {
		t.Fatalf("%d timers after a change, want %d: the flush timer armed once", got, idle+1)
	}
	clock.Advance(40 * time.Millisecond)
	e.publish(ev("a", "b1", "b", 1, pending))
	e.waitCursor(2)
	if got := clock.Waiters(); got != idle+1 {
		t.Fatalf("%d timers after a second group's change, want still %d", got, idle+1)
	}
	// a falls due 100 ms after its change; b 40 ms later.
	clock.Advance(60 * time.Millisecond)
	if m := a.readType(apiclient.MsgTasks); taskIDs(m.Tasks) != "a1=pending" {
		t.Fatalf("a got %s", taskIDs(m.Tasks))
	}
	e.publish(ev("a", "b2", "b", 1, pending)) // joins b's pending flush
	e.waitCursor(3)
	clock.Advance(40 * time.Millisecond)
	if m := b.readType(apiclient.MsgTasks); taskIDs(m.Tasks) != "b1=pending,b2=pending" {
		t.Fatalf("b got %s", taskIDs(m.Tasks))
	}
	// Nothing is due: the timer is not armed again.
	if got := clock.Waiters(); got != idle {
		t.Errorf("%d timers with nothing due, want %d", got, idle)
	}
}

// TestMergeTasks: a writer that is behind sends consecutive tasks messages
// as one, with every task in order and the last message's cursor. Every
// case reuses the buffer of the one before, as a writer does.
func TestMergeTasks(t *testing.T) {
	t.Parallel()
	msg := func(cursor string, tasks ...string) queued {
		enc := make([][]byte, len(tasks))
		for i, id := range tasks {
			enc[i], _ = json.Marshal(apollo.Task{TaskID: id, Status: pending})
		}
		data := appendTasksMsg(nil, apiclient.MsgTasks, cursor, "", enc)
		_, at := appendTasksHead(nil, apiclient.MsgTasks, cursor, "")
		return queued{data: data, tasksAt: at, cursor: cursor}
	}
	tests := []struct {
		name string
		in   []queued
		want string
	}{
		{"two", []queued{msg("e.1", "a"), msg("e.2", "b", "c")}, "a=pending,b=pending,c=pending"},
		{"an empty one between", []queued{msg("e.1", "a"), msg("e.2"), msg("e.3", "b")}, "a=pending,b=pending"},
		{"empty first", []queued{msg("e.1"), msg("e.3", "b")}, "b=pending"},
	}
	var buf []byte
	for _, tt := range tests {
		var m wireMsg
		buf = mergeTasks(buf[:0], tt.in)
		if err := json.Unmarshal(buf, &m); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		last := tt.in[len(tt.in)-1].cursor
		if m.Type != apiclient.MsgTasks || m.Cursor != last || taskIDs(m.Tasks) != tt.want {
			t.Errorf("%s: %s %s %s, want tasks %s %s", tt.name, m.Type, m.Cursor, taskIDs(m.Tasks), last, tt.want)
		}
	}
}

// TestStreamWriterMergesWhatQueued: an unthrottled client whose writer
// finds several tasks messages queued gets them as one message, every
// task in order, and the next merge carries nothing of the one before
// (the pool often hands the writer the same buffer; TestMergeTasks
// reuses one for certain).
func TestStreamWriterMergesWhatQueued(t *testing.T) {
	t.Parallel()
	var gate writerGate
	e := newStreamEnv(t, func(o *Options) {
		o.HeartbeatInterval = -1 // nothing but the test's changes in the queue
		gate.install(t, o)
	})
	c := e.dial("view-a")
	c.subscribe(sub{"type": "subscribe", "coalesce": false})
	var cursor uint64
	for _, ids := range [][]string{{"m1", "m2", "m3", "m4"}, {"m5", "m6"}} {
		gate.hold()
		var want []string
		for _, id := range ids { // one batch, one group message, each
			e.publish(ev("a", id, "job", 1, pending))
			cursor++
			e.waitCursor(cursor)
			want = append(want, id+"=pending")
		}
		gate.release()
		m := c.readType(apiclient.MsgTasks)
		if got := taskIDs(m.Tasks); got != strings.Join(want, ",") {
			t.Fatalf("one message with %s, want %s", got, strings.Join(want, ","))
		}
	}
}
