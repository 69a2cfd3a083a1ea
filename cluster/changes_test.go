package cluster

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/apollo-11/apollo"
)

// A batch of changes reads back in the order it was gathered, with each
// record's tenant from its task, in two tenants; a lone change's JSON (as
// nodes before batching published it) still reads.
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
	if err := decodeChanges(data, func(c *apollo.Change) { got = append(got, c) }); err != nil {
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
	if err := decodeChanges(one, func(c *apollo.Change) { got = append(got, c) }); err != nil || len(got) != 1 || got[0].Record.Tenant != "acme" {
		t.Errorf("a lone change: %v %+v", err, got)
	}
	if err := decodeChanges(append([]byte(changesMagic), 0x7f, '{'), func(*apollo.Change) {}); err == nil {
		t.Error("a cut batch was read")
	}
}

// FuzzDecodeChanges: the decoder of what any publisher on apollo.changes.>
// sent never panics.
func FuzzDecodeChanges(f *testing.F) {
	f.Add([]byte(`{"Record":{},"Task":{"taskID":"x","tenant":"a"}}`))
	f.Add(append([]byte(changesMagic), 2, '{', '}'))
	f.Add([]byte(changesMagic + "\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeChanges(data, func(c *apollo.Change) {
			if c.Record.Tenant != c.Task.Tenant {
				t.Fatalf("record tenant %q, task tenant %q", c.Record.Tenant, c.Task.Tenant)
			}
		})
	})
}
