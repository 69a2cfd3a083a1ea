package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/apollo-11/apollo"
)

// binBatch is a binary batch of cs, as a publisher writes it.
func binBatch(t testing.TB, cs ...apollo.Change) []byte {
	t.Helper()
	b := []byte(changesBinMagic)
	for i := range cs {
		var err error
		if b, err = appendChange(b, &cs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func readChanges(t testing.TB, data []byte) []apollo.Change {
	t.Helper()
	var got []apollo.Change
	if passed, err := decodeChanges(data, func(c *apollo.Change) { got = append(got, *c) }); err != nil || passed != 0 {
		t.Fatalf("%d changes passed over, %v", passed, err)
	}
	return got
}

// withTaskTenant is c as a reader gets it back: the form carries a
// record's tenant only as its task's.
func withTaskTenant(c apollo.Change) apollo.Change {
	c.Record.Tenant = c.Task.Tenant
	c.Task.History = append([]apollo.Record(nil), c.Task.History...)
	for i := range c.Task.History {
		c.Task.History[i].Tenant = c.Task.Tenant
	}
	return c
}

// fillChange sets every field of a change, however deep, to a value
// other than its zero, by reflection: a field added to these types is
// filled too, and a form that does not carry it fails the round trip.
func fillChange(t testing.TB) apollo.Change {
	var c apollo.Change
	n := 0
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		n++
		switch v.Type() {
		case reflect.TypeFor[apollo.Status]():
			v.Set(reflect.ValueOf(apollo.Statuses()[n%len(apollo.Statuses())]))
			return
		case reflect.TypeFor[apollo.Kind]():
			v.Set(reflect.ValueOf(apollo.KindCorrection + apollo.Kind(n%5)))
			return
		case reflect.TypeFor[json.RawMessage]():
			v.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))))
			return
		}
		switch v.Kind() {
		case reflect.String:
			v.SetString(fmt.Sprintf("%s-%d", path, n))
		case reflect.Int64:
			v.SetInt(int64(n)*1_764_547_200_001 - 1<<41)
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Struct:
			for i := range v.NumField() {
				// Not on the wire on purpose (changesBinMagic).
				if (v.Type() == reflect.TypeFor[apollo.Task]() || v.Type() == reflect.TypeFor[apollo.Before]()) && v.Type().Field(i).Name == "FinishReceivedAt" ||
					v.Type() == reflect.TypeFor[apollo.Change]() && v.Type().Field(i).Name == "LSN" {
					continue
				}
				fill(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range v.Len() {
				fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		default:
			t.Fatalf("%s is a %s: teach fillChange and the change's form this kind", path, v.Type())
		}
	}
	fill(reflect.ValueOf(&c).Elem(), "c")
	return withTaskTenant(c)
}

// The binary form keeps every field of a change: fillChange sets them
// all, so a field added to Change, Record, Event or Task and not written
// by appendChange (and read by decodeBinChanges) fails here.
func TestChangeFieldsKnown(t *testing.T) {
	c := fillChange(t)
	if c.Task.Tenant == "" || len(c.Task.History) == 0 || c.Record.Kind == apollo.KindReport || len(c.Record.Extra) == 0 {
		t.Fatalf("not every field was filled: %+v", c)
	}
	got := readChanges(t, binBatch(t, c))
	if len(got) != 1 || !reflect.DeepEqual(got[0], c) {
		t.Fatalf("read back\n%+v\nwrote\n%+v", got, c)
	}
}

func TestChangeRoundTrip(t *testing.T) {
	full := fillChange(t)
	newTask := apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "x", Sequence: 1, Status: apollo.StatusPending, Ts: 1764547200000},
		ReceivedAt: 1764547200003}, Task: apollo.Task{TaskID: "x", Name: "x", Status: apollo.StatusPending, Sequence: 1, CreatedAt: 1764547200003, UpdatedAt: 1764547200003}}
	running := newTask
	running.Record.Sequence, running.Record.Status = 2, apollo.StatusRunning
	running.Prev, running.Task.Status, running.Task.Sequence = apollo.BeforeOf(&newTask.Task), apollo.StatusRunning, 2
	for _, tc := range []struct {
		name string
		cs   []apollo.Change
	}{
		{"empty", []apollo.Change{{}}},
		{"every field", []apollo.Change{full}},
		{"a task's run, in order", []apollo.Change{newTask, running}},
		{"two tenants in one batch", []apollo.Change{withTenant(newTask, "acme"), withTenant(running, ""), withTenant(running, "beta")}},
		{"UTF-8, escapes and extra", []apollo.Change{withTaskTenant(apollo.Change{
			Record: apollo.Record{Event: apollo.Event{TaskID: "задача\"<1>", Name: "备份\x00", Extra: json.RawMessage(` {"a": "<b>"} `)},
				Kind: apollo.KindGap, Reason: "2 earlier events never arrived\n"},
			Task: apollo.Task{TaskID: "задача\"<1>", Tenant: "é"}})}},
		{"negative and large numbers", []apollo.Change{{Record: apollo.Record{Event: apollo.Event{Sequence: apollo.MaxSequence, Ts: -1}},
			Task: apollo.Task{ScheduledAt: -1 << 62, UpdatedAt: 1<<63 - 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readChanges(t, binBatch(t, tc.cs...))
			var want []apollo.Change
			for _, c := range tc.cs {
				want = append(want, withTaskTenant(c))
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read back\n%+v\nwrote\n%+v", got, want)
			}
		})
	}
}

func withTenant(c apollo.Change, tenant string) apollo.Change {
	c.Task.Tenant, c.Record.Tenant = tenant, tenant
	return c
}

// A change that has no wire name for its status or kind is refused, as
// json.Marshal refused it, and the batch keeps what it held.
func TestChangeInvalidRefused(t *testing.T) {
	for name, c := range map[string]apollo.Change{
		"record status": {Record: apollo.Record{Event: apollo.Event{Status: apollo.Status(200)}}},
		"task status":   {Task: apollo.Task{Status: apollo.Status(77)}},
		"prev status":   {Prev: apollo.Before{Status: apollo.Status(99)}},
		"history kind":  {Task: apollo.Task{History: []apollo.Record{{Kind: apollo.Kind(9)}}}},
	} {
		b, err := appendChange([]byte(changesBinMagic), &c)
		if err == nil || string(b) != changesBinMagic {
			t.Errorf("%s: %v, %q", name, err, b)
		}
	}
}

// A binary batch cut or altered anywhere is refused; the changes before
// the damage came out, none after.
func TestDamagedChangeBatch(t *testing.T) {
	a := withTenant(fillChange(t), "acme")
	b := withTenant(apollo.Change{Record: apollo.Record{Event: apollo.Event{TaskID: "b", Status: apollo.StatusFailed}}}, "beta")
	data := binBatch(t, a, b)
	first := len(binBatch(t, a))
	for cut := len(changesBinMagic) + 1; cut < len(data); cut++ {
		var got []*apollo.Change
		_, err := decodeChanges(data[:cut], func(c *apollo.Change) { got = append(got, c) })
		want := 0
		if cut >= first {
			want = 1
		}
		if cut == first {
			if err != nil {
				t.Errorf("cut after the first change: %v", err)
			}
		} else if err == nil {
			t.Errorf("cut at %d of %d bytes: no error", cut, len(data))
		}
		if len(got) != want {
			t.Errorf("cut at %d: %d changes came out, want %d", cut, len(got), want)
		}
	}
	// A name altered is not damage a reader can tell from a name of a
	// newer build: that change alone is passed over (changenewer_test.go).
	for _, name := range []string{"failed", "report"} {
		bad := bytes.Clone(data)
		bad[bytes.LastIndex(bad, []byte(name))] = 'X'
		var got []*apollo.Change
		passed, err := decodeChanges(bad, func(c *apollo.Change) { got = append(got, c) })
		if err != nil || passed != 1 || len(got) != 1 || got[0].Task.TaskID != a.Task.TaskID {
			t.Errorf("b with a damaged %q: %d read, %d passed over, %v; want a read, b passed over", name, len(got), passed, err)
		}
	}
}

// A rolling upgrade has nodes of the previous release listening to the
// batches this one publishes: they read "\x00AC1" and "\x00AC2" and cut
// their stream clients, once a second, on anything else. So this release
// publishes the version 2 layout, which they read field for field; the
// one field it lacks, FinishReceivedAt, no listener uses (the stream shows
// a task as JSON, where it is "-").
func TestPublishedBatchReadByThePreviousRelease(t *testing.T) {
	c := fillChange(t)
	c.Prev.FinishReceivedAt, c.Task.FinishReceivedAt = 1764547200001, 1764547200002
	b := binBatch(t, c)
	if !hasMagic(b, "\x00AC2") {
		t.Fatalf("a batch starts %q: nodes of the previous release cannot read it", b[:4])
	}
	var got []apollo.Change
	if _, err := decodeBinChanges(b[4:], func(c *apollo.Change) { got = append(got, *c) }); err != nil {
		t.Fatalf("read as the previous release reads it: %v", err)
	}
	c.Prev.FinishReceivedAt, c.Task.FinishReceivedAt = 0, 0
	if len(got) != 1 || !reflect.DeepEqual(got[0], c) {
		t.Fatalf("the previous release reads\n%+v\nwritten\n%+v", got, c)
	}
}
