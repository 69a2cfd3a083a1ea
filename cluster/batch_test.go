package cluster

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/apollo-11/apollo"
)

func batchOf(evs ...apollo.Event) []byte {
	b := []byte(batchMagic)
	for i := range evs {
		b = appendBatchEvent(b, &evs[i])
	}
	return b
}

func readBatch(t testing.TB, data []byte) []apollo.Event {
	t.Helper()
	var got []apollo.Event
	err := decodeBatch(data, func(ev apollo.Event) { got = append(got, ev) },
		func(ev apollo.Event, err error) { t.Errorf("event %s:%d passed over: %v", ev.TaskID, ev.Sequence, err) })
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestBatchRoundTrip(t *testing.T) {
	full := apollo.Event{TaskID: "t-1", Name: "backup", Sequence: 3, Status: apollo.StatusSuccess, Ts: 1764547200000,
		ScheduledAt: 1764547100000, TimeoutMs: 60000, CostMs: 1234, Extra: json.RawMessage(`{"host":"db-1","n":[1,2]}`)}
	for _, tc := range []struct {
		name string
		evs  []apollo.Event
	}{
		{"one event, every field", []apollo.Event{full}},
		{"only the required fields", []apollo.Event{{TaskID: "x", Sequence: 1, Status: apollo.StatusPending, Ts: 1}}},
		{"a run in order", []apollo.Event{
			{TaskID: "r", Name: "j", Sequence: 1, Status: apollo.StatusPending, Ts: 5},
			{TaskID: "r", Name: "j", Sequence: 2, Status: apollo.StatusRunning, Ts: 6},
			{TaskID: "r", Name: "j", Sequence: 3, Status: apollo.StatusFailed, Ts: 7, CostMs: 1},
		}},
		{"negative and large numbers", []apollo.Event{{TaskID: "n", Sequence: apollo.MaxSequence, Status: apollo.StatusRunning, Ts: -1, ScheduledAt: -1 << 40}}},
		{"UTF-8 names", []apollo.Event{{TaskID: "задача-1", Name: "备份", Sequence: 1, Status: apollo.StatusPending, Ts: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := batchOf(tc.evs...)
			if !isBatch(data) {
				t.Fatalf("a batch does not start with its magic: % x", data[:4])
			}
			if got := readBatch(t, data); !reflect.DeepEqual(got, tc.evs) {
				t.Fatalf("read back\n%+v\nwrote\n%+v", got, tc.evs)
			}
		})
	}
}

// A batch cut or altered anywhere is refused with its place; the events
// before the damage still come out (the owner keeps them), none after.
func TestDamagedBatch(t *testing.T) {
	evs := []apollo.Event{
		{TaskID: "a", Sequence: 1, Status: apollo.StatusPending, Ts: 1},
		{TaskID: "b", Sequence: 1, Status: apollo.StatusPending, Ts: 1},
	}
	data := batchOf(evs...)
	first := len(batchOf(evs[0]))
	for cut := len(batchMagic) + 1; cut < len(data); cut++ {
		var got []apollo.Event
		err := decodeBatch(data[:cut], func(ev apollo.Event) { got = append(got, ev) }, noPass(t))
		if cut == first {
			if err != nil || len(got) != 1 {
				t.Errorf("cut after the first event: %v, %d events", err, len(got))
			}
			continue
		}
		if err == nil {
			t.Errorf("cut at %d of %d bytes: no error", cut, len(data))
		}
		if len(got) > 1 || len(got) == 1 && cut < first {
			t.Errorf("cut at %d: %d events came out", cut, len(got))
		}
	}
	if err := decodeBatch([]byte(`{"taskID":"j"}`), func(apollo.Event) {}, noPass(t)); err == nil {
		t.Error("JSON was read as a batch")
	}
}

// The batch decoder reads what anyone allowed on the subject published:
// it never panics, and what it reads writes back to the same events.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(batchOf(apollo.Event{TaskID: "t", Name: "n", Sequence: 2, Status: apollo.StatusRunning, Ts: 9, Extra: json.RawMessage(`{}`)}))
	f.Add([]byte(batchMagic + "\x05hello"))
	f.Add([]byte(batchMagic + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"))
	f.Add([]byte(`{"taskID":"x"}`))
	f.Add(newerEventBatch(f, "a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, passed []apollo.Event
		err := decodeBatch(data, func(ev apollo.Event) { got = append(got, ev) }, func(ev apollo.Event, err error) {
			if ev.Status != apollo.StatusNone || err == nil {
				t.Fatalf("event %+v passed over (%v), though its status was read", ev, err)
			}
			passed = append(passed, ev)
		})
		for _, ev := range got {
			if !ev.Status.Valid() {
				t.Fatalf("event %+v read with no status", ev)
			}
		}
		if err != nil || len(got) == 0 {
			return
		}
		if again := readBatch(t, batchOf(got...)); !reflect.DeepEqual(again, got) {
			t.Fatalf("read %+v, wrote it back, read %+v", got, again)
		}
	})
}
