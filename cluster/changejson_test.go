package cluster

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/apollo-11/apollo"
)

// appendChangeJSON appends json.Marshal(c) to b, byte for byte, without
// reflection for the common change: every string plain ASCII needing no
// escape, no extra, statuses and kinds valid; anything else goes through
// json.Marshal. Nodes published changes so (changesMagic) before the
// binary form (changesBinMagic); it stays here to write the batches that
// readers must still read, and as the reference of BenchmarkPublishChange.
// TestMarshalChangeMatchesJSON and FuzzMarshalChange hold it to
// json.Marshal. On an error b is returned as it was.
func appendChangeJSON(b []byte, c *apollo.Change) ([]byte, error) {
	if !plainChange(c) {
		js, err := json.Marshal(c)
		if err != nil {
			return b, err
		}
		return append(b, js...), nil
	}
	b = append(b, `{"Record":`...)
	b = appendRecordJSON(b, &c.Record)
	b = append(b, `,"Prev":`...)
	b = appendTaskJSON(b, &c.Prev)
	b = append(b, `,"Task":`...)
	b = appendTaskJSON(b, &c.Task)
	b = append(b, `,"BecameLate":`...)
	b = strconv.AppendBool(b, c.BecameLate)
	return append(b, '}'), nil
}

func plainChange(c *apollo.Change) bool {
	r := &c.Record
	return len(r.Extra) == 0 && r.Kind.Valid() && statusPlain(r.Status) && statusPlain(c.Prev.Status) && statusPlain(c.Task.Status) &&
		len(c.Prev.History) == 0 && len(c.Task.History) == 0 &&
		plain(r.TaskID) && plain(r.Name) && plain(r.Actor) && plain(r.Reason) &&
		plain(c.Prev.TaskID) && plain(c.Prev.Name) && plain(c.Prev.Tenant) &&
		plain(c.Task.TaskID) && plain(c.Task.Name) && plain(c.Task.Tenant)
}

// plain says whether json.Marshal writes s as it is between quotes.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func appendStr(b []byte, key, v string) []byte {
	b = append(b, key...)
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

func appendInt(b []byte, key string, v int64) []byte {
	return strconv.AppendInt(append(b, key...), v, 10)
}

func appendRecordJSON(b []byte, r *apollo.Record) []byte {
	b = appendStr(b, `{"taskID":`, r.TaskID)
	if r.Name != "" {
		b = appendStr(b, `,"name":`, r.Name)
	}
	b = appendInt(b, `,"sequence":`, r.Sequence)
	b = appendStr(b, `,"status":`, statusText(r.Status))
	b = appendInt(b, `,"ts":`, r.Ts)
	if r.ScheduledAt != 0 {
		b = appendInt(b, `,"scheduledAt":`, r.ScheduledAt)
	}
	if r.TimeoutMs != 0 {
		b = appendInt(b, `,"timeoutMs":`, r.TimeoutMs)
	}
	if r.CostMs != 0 {
		b = appendInt(b, `,"costMs":`, r.CostMs)
	}
	b = appendStr(b, `,"kind":`, r.Kind.String())
	b = appendInt(b, `,"receivedAt":`, r.ReceivedAt)
	if r.Actor != "" {
		b = appendStr(b, `,"actor":`, r.Actor)
	}
	if r.Reason != "" {
		b = appendStr(b, `,"reason":`, r.Reason)
	}
	return append(b, '}')
}

func appendTaskJSON(b []byte, t *apollo.Task) []byte {
	b = appendStr(b, `{"taskID":`, t.TaskID)
	b = appendStr(b, `,"name":`, t.Name)
	if t.Tenant != "" {
		b = appendStr(b, `,"tenant":`, t.Tenant)
	}
	b = appendStr(b, `,"status":`, statusText(t.Status))
	b = appendInt(b, `,"sequence":`, t.Sequence)
	for _, f := range [...]struct {
		key string
		v   int64
	}{{`,"scheduledAt":`, t.ScheduledAt}, {`,"startedAt":`, t.StartedAt}, {`,"finishedAt":`, t.FinishedAt}, {`,"createdAt":`, t.CreatedAt}} {
		if f.v != 0 {
			b = appendInt(b, f.key, f.v)
		}
	}
	b = appendInt(b, `,"updatedAt":`, t.UpdatedAt)
	if t.TimeoutMs != 0 {
		b = appendInt(b, `,"timeoutMs":`, t.TimeoutMs)
	}
	if t.CostMs != 0 {
		b = appendInt(b, `,"costMs":`, t.CostMs)
	}
	if t.Late {
		b = append(b, `,"late":true`...)
	}
	return append(b, '}')
}

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
