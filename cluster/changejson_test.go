package cluster

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/apollo-11/apollo"
)

func checkMarshalChange(t testing.TB, c *apollo.Change) {
	t.Helper()
	want, werr := json.Marshal(c)
	// It appends: what the buffer held stays, on an error too.
	const before = "held"
	got, err := appendChangeJSON([]byte(before), c)
	if (err != nil) != (werr != nil) {
		t.Fatalf("error %v, json.Marshal's %v", err, werr)
	}
	if !bytes.HasPrefix(got, []byte(before)) {
		t.Fatalf("what the buffer held was lost: %q", got)
	}
	if got = got[len(before):]; !bytes.Equal(got, want) {
		t.Fatalf("wrote\n%s\njson.Marshal writes\n%s", got, want)
	}
}

func TestMarshalChangeMatchesJSON(t *testing.T) {
	full := apollo.Task{TaskID: "t-1", Name: "backup", Tenant: "acme", Status: apollo.StatusRunning, Sequence: 2,
		ScheduledAt: 1, StartedAt: 2, FinishedAt: 3, CreatedAt: 4, UpdatedAt: 5, TimeoutMs: 6, CostMs: 7, Late: true}
	rec := apollo.Record{Event: apollo.Event{TaskID: "t-1", Name: "backup", Sequence: 2, Status: apollo.StatusRunning, Ts: -9,
		ScheduledAt: 1, TimeoutMs: 60000, CostMs: 3}, Kind: apollo.KindGap, ReceivedAt: 99, Actor: "ops", Reason: "1 earlier event never arrived"}
	for _, tc := range []struct {
		name string
		c    apollo.Change
	}{
		{"empty", apollo.Change{}},
		{"new task, no tenant", apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "x", Sequence: 1, Status: apollo.StatusPending, Ts: 1}},
			Task: apollo.Task{TaskID: "x", Status: apollo.StatusPending, Sequence: 1, UpdatedAt: 3}}},
		{"every field", apollo.Change{Record: rec, Prev: full, Task: full, BecameLate: true}},
		{"tenant of the other", apollo.Change{Record: rec, Task: apollo.Task{TaskID: "t-1", Tenant: "beta"}}},
		{"extra goes through json", apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "e", Extra: json.RawMessage(` {"a": "<b>"} `)}}}},
		{"escapes go through json", apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "a\"b<c>&\u2028é\x01"}}}},
		{"history goes through json", apollo.Change{Task: apollo.Task{TaskID: "h", History: []apollo.Record{rec}}}},
		{"a bad status errs as json's does", apollo.Change{Task: apollo.Task{Status: apollo.Status(200)}}},
		{"an unknown kind", apollo.Change{Record: apollo.Record{Kind: apollo.Kind(77)}}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkMarshalChange(t, &tc.c) })
	}
}

// The hand-written encoder knows these fields; a new one must be added to
// it (or it goes to json.Marshal) before this test passes again.
func TestChangeFieldsKnown(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want int
	}{{apollo.Change{}, 4}, {apollo.Record{}, 5}, {apollo.Event{}, 10}, {apollo.Task{}, 14}} {
		if n := reflect.TypeOf(tc.v).NumField(); n != tc.want {
			t.Errorf("%T has %d fields, marshalChange knows %d: teach it the new ones", tc.v, n, tc.want)
		}
	}
}

func FuzzMarshalChange(f *testing.F) {
	f.Add("t", "job", "acme", int64(1), uint8(2), uint8(0), int64(5), "", false)
	f.Add("a<b", "", "", int64(-1), uint8(9), uint8(3), int64(0), "r\n", true)
	f.Fuzz(func(t *testing.T, id, name, tenant string, n int64, status, kind uint8, at int64, reason string, late bool) {
		c := apollo.Change{
			Record: apollo.Record{Event: apollo.Event{TaskID: id, Name: name, Sequence: n, Status: apollo.Status(status), Ts: at, CostMs: n},
				Kind: apollo.Kind(kind), ReceivedAt: at, Reason: reason},
			Prev:       apollo.Task{TaskID: id, Tenant: tenant, Status: apollo.Status(status % 4), StartedAt: at},
			Task:       apollo.Task{TaskID: id, Name: name, Tenant: tenant, Status: apollo.Status(status), Sequence: n, FinishedAt: n, Late: late},
			BecameLate: late,
		}
		checkMarshalChange(t, &c)
	})
}
