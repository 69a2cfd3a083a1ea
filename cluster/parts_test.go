package cluster

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// partsNode is a node with what partsOf needs and nothing else.
func partsNode(partitions int) *Node {
	return &Node{opts: Options{Partitions: partitions}, queues: map[string]*subjectQueue{}}
}

// requestEvents is a request of runs reporting pending, running and
// success, spread over two tenants (one whose token is escaped).
func requestEvents(runs int) []apollo.Event {
	var evs []apollo.Event
	for r := range runs {
		tenant := []string{"acme", "beta_co"}[r%2]
		id := fmt.Sprintf("run-%05d", r)
		for q, st := range []apollo.Status{apollo.StatusPending, apollo.StatusRunning, apollo.StatusSuccess} {
			evs = append(evs, apollo.Event{TaskID: id, Name: "nightly", Sequence: int64(q + 1), Status: st, Ts: 1764547200000 + int64(q), Tenant: tenant})
		}
	}
	return evs
}

// TestPartsOf: every valid event is in exactly one part, in the request's
// order; a part holds one subject's events, encoded as a batch reads them
// back, with their message IDs; the invalid event is answered.
func TestPartsOf(t *testing.T) {
	n := partsNode(12)
	evs := requestEvents(40)
	evs[7].Sequence = 0 // invalid
	out := make([]bus.Outcome, len(evs))
	parts := n.partsOf(evs, out)
	if out[7].Result != bus.Rejected || out[7].Err == nil {
		t.Fatalf("the invalid event was answered %+v", out[7])
	}
	seen := map[int]bool{}
	for _, pt := range parts {
		if len(pt.data) != cap(pt.data) || len(pt.ids) != cap(pt.ids) || len(pt.idx) != cap(pt.idx) {
			t.Fatalf("a part's sizes were not exact: data %d of %d, ids %d of %d, events %d of %d",
				len(pt.data), cap(pt.data), len(pt.ids), cap(pt.ids), len(pt.idx), cap(pt.idx))
		}
		var want []apollo.Event
		var ids strings.Builder
		for k, i := range pt.idx {
			if seen[i] {
				t.Fatalf("event %d is in two parts", i)
			}
			seen[i] = true
			if k > 0 && i <= pt.idx[k-1] {
				t.Fatalf("a part's events are out of the request's order: %v", pt.idx)
			}
			ev := evs[i]
			if subj := EventSubject(ev.Tenant, Partition(ev.TaskID, 12)); subj != pt.q.subject {
				t.Fatalf("event %d (subject %s) is in the part of %s", i, subj, pt.q.subject)
			}
			ids.WriteString(MsgID(ev.Tenant, ev.TaskID, ev.Sequence) + "\xff")
			ev.Tenant = "" // a batch does not carry it: the subject does
			want = append(want, ev)
		}
		if got := readBatch(t, append([]byte(batchMagic), pt.data...)); !reflect.DeepEqual(got, want) {
			t.Fatalf("a part's batch reads back\n%+v\nwant\n%+v", got, want)
		}
		if string(pt.ids) != ids.String() {
			t.Fatalf("a part's message IDs are %q, want %q", pt.ids, ids.String())
		}
	}
	if len(seen) != len(evs)-1 {
		t.Fatalf("%d events in parts, want %d", len(seen), len(evs)-1)
	}
}

// TestPartsOfAllocatesPerPart: what partsOf allocates depends on the
// number of parts, not of events.
func TestPartsOfAllocatesPerPart(t *testing.T) {
	n := partsNode(12)
	allocs := func(runs int) float64 {
		evs := requestEvents(runs)
		out := make([]bus.Outcome, len(evs))
		n.partsOf(evs, out) // the subjects' queues exist from here on
		return testing.AllocsPerRun(20, func() { n.partsOf(evs, out) })
	}
	small, large := allocs(40), allocs(400)
	if large > small+2 {
		t.Fatalf("partsOf allocated %.0f times for 120 events and %.0f for 1 200: it grows with the events", small, large)
	}
	t.Logf("%.0f allocations for 120 events, %.0f for 1 200", small, large)
}

// The sizes partsOf cuts its arrays to are those the appends take, at
// the extremes of every number and with tenants that need escaping.
func TestPartSizesMatchAppends(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 127, 128, 9, 10, 99, 100, math.MaxInt64, math.MinInt64, math.MaxInt32, -1 << 40} {
		checkPartSizes(t, apollo.Event{TaskID: "t", Name: "n", Sequence: v, Status: apollo.StatusFailed, Ts: v, ScheduledAt: v, TimeoutMs: v, CostMs: v,
			Extra: json.RawMessage(`{"a":1}`)}, "a b_c/%")
	}
	checkPartSizes(t, apollo.Event{TaskID: strings.Repeat("x", 300), Sequence: 1, Status: apollo.StatusPending}, "")
}

func checkPartSizes(t testing.TB, ev apollo.Event, tenant string) {
	t.Helper()
	if got, want := batchEventSize(&ev), len(appendBatchEvent(nil, &ev)); got != want {
		t.Fatalf("batchEventSize(%+v) = %d, appendBatchEvent appends %d", ev, got, want)
	}
	tok := TenantToken(tenant)
	if got, want := msgIDSize(tok, ev.TaskID, ev.Sequence), len(appendMsgID(nil, tok, ev.TaskID, ev.Sequence)); got != want {
		t.Fatalf("msgIDSize(%q, %q, %d) = %d, appendMsgID appends %d", tok, ev.TaskID, ev.Sequence, got, want)
	}
}

func FuzzPartSizes(f *testing.F) {
	f.Add("t-1", "backup", "acme", int64(3), int64(1764547200000), int64(0), int64(60000), int64(-5), []byte(`{"h":1}`), uint8(2))
	f.Fuzz(func(t *testing.T, id, name, tenant string, seq, ts, sched, timeout, cost int64, extra []byte, st uint8) {
		ev := apollo.Event{TaskID: id, Name: name, Sequence: seq, Status: apollo.Status(st), Ts: ts, ScheduledAt: sched,
			TimeoutMs: timeout, CostMs: cost, Extra: extra}
		checkPartSizes(t, ev, tenant)
	})
}

// TestPartsOfCutsLargeGroups: a subject's events past maxEventBatch go in
// further parts, each starting once the one before holds more than the
// bound, every event in exactly one, in the request's order.
func TestPartsOfCutsLargeGroups(t *testing.T) {
	n := partsNode(1) // one partition: every event has the same subject
	extra := json.RawMessage(`"` + strings.Repeat("x", apollo.MaxExtraBytes-2) + `"`)
	evs := make([]apollo.Event, 200) // about 800 KiB
	for i := range evs {
		evs[i] = apollo.Event{TaskID: fmt.Sprintf("big-%03d", i), Sequence: 1, Status: apollo.StatusPending, Ts: 1764547200000, Extra: extra, Tenant: "acme"}
	}
	out := make([]bus.Outcome, len(evs))
	parts := n.partsOf(evs, out)
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("event %d refused: %v", i, o.Err)
		}
	}
	if len(parts) < 3 {
		t.Fatalf("%d parts for about 800 KiB of one subject, want at least 3", len(parts))
	}
	next := 0
	for k, pt := range parts {
		if k < len(parts)-1 && len(pt.data) <= maxEventBatch {
			t.Errorf("part %d ends at %d bytes, not past the bound of %d", k, len(pt.data), maxEventBatch)
		}
		if last := batchEventSize(&evs[pt.idx[len(pt.idx)-1]]); len(pt.data)-last > maxEventBatch {
			t.Errorf("part %d took an event after it was past the bound", k)
		}
		for _, i := range pt.idx {
			if i != next {
				t.Fatalf("part %d holds event %d, want %d", k, i, next)
			}
			next++
		}
		if got := readBatch(t, append([]byte(batchMagic), pt.data...)); len(got) != len(pt.idx) {
			t.Fatalf("part %d reads back %d events, holds %d", k, len(got), len(pt.idx))
		}
	}
	if next != len(evs) {
		t.Fatalf("%d events in parts, want %d", next, len(evs))
	}
}
