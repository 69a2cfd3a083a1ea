package cluster

import (
	"encoding/binary"
	"errors"

	"github.com/apollo-11/apollo"
)

// changesBinMagic starts a batch of changes in binary form, version 2 of
// the changes' wire format (changesMagic, JSON, was version 1). Each
// change follows the one before with no length: its record, Prev and Task
// field by field in the order of their types (appendChange), strings as a
// uvarint length and bytes, numbers as zigzag varints, statuses and kinds
// by their wire names, which outlive a renumbering. A record's tenant is
// not written: it is its task's, as in the JSON form. A reader that meets
// a version it does not know refuses the whole message (decodeChanges);
// one that meets a status or kind name it does not know (a newer build's)
// passes over that change alone, which it can, as every name is a string
// of its own length (decodeBinChanges).
//
// A task's FinishReceivedAt is not written and arrives as 0: no listener
// needs it (a stream shows a task as JSON, where it is "-"), and a new
// version for it would cut, in a rolling upgrade, the stream clients of
// every node not yet upgraded to a snapshot a second (fanIn.deliver) for
// as long as the upgrade lasts. Builds between two releases published it
// as "\x00AC3", which is therefore taken: a new layout is "\x00AC4".
// A change's LSN is not written either: it is a place in the log of the
// node that made the change, which means nothing to another node.
const changesBinMagic = "\x00AC2"

// errChangeInvalid: a change whose status or kind has no wire name is
// not published, as json.Marshal refused it before.
var errChangeInvalid = errors.New("cluster: a change with an unknown status or kind")

// appendChange appends c in binary form to b, a batch that starts with
// changesBinMagic. On an error b is returned as it was. The JSON it
// replaced cost a node 7 % of its CPU (the profile in docs/benchmarks.md);
// BenchmarkPublishChange compares the two. TestChangeFieldsKnown fails
// when a field is added to the types and not written here.
func appendChange(b []byte, c *apollo.Change) ([]byte, error) {
	e := changeEncoder{b: b}
	e.record(&c.Record)
	prev := c.PrevTask()
	e.task(&prev)
	e.task(&c.Task)
	e.bool(c.BecameLate)
	if e.bad {
		return b, errChangeInvalid
	}
	return e.b, nil
}

type changeEncoder struct {
	b   []byte
	bad bool
}

func (e *changeEncoder) str(s string) { e.b = appendString(e.b, s) }
func (e *changeEncoder) int(v int64)  { e.b = binary.AppendVarint(e.b, v) }

func (e *changeEncoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *changeEncoder) status(s apollo.Status) {
	e.bad = e.bad || !statusPlain(s)
	e.str(statusText(s))
}

// statusPlain: a status with a wire name, none included (as
// Status.MarshalText writes it without an error).
func statusPlain(s apollo.Status) bool { return s == apollo.StatusNone || s.Valid() }

// statusText is a status's wire name, empty for none.
func statusText(s apollo.Status) string {
	if s == apollo.StatusNone {
		return ""
	}
	return s.String()
}

func (e *changeEncoder) record(r *apollo.Record) {
	e.str(r.TaskID)
	e.str(r.Name)
	e.int(r.Sequence)
	e.status(r.Status)
	e.int(r.Ts)
	e.int(r.ScheduledAt)
	e.int(r.TimeoutMs)
	e.int(r.CostMs)
	e.str(string(r.Extra))
	e.bad = e.bad || !r.Kind.Valid()
	e.str(r.Kind.String())
	e.int(r.ReceivedAt)
	e.str(r.Actor)
	e.str(r.Reason)
}

func (e *changeEncoder) task(t *apollo.Task) {
	e.str(t.TaskID)
	e.str(t.Name)
	e.str(t.Tenant)
	e.status(t.Status)
	e.int(t.Sequence)
	e.int(t.ScheduledAt)
	e.int(t.StartedAt)
	e.int(t.FinishedAt)
	e.int(t.CreatedAt)
	e.int(t.UpdatedAt)
	e.int(t.TimeoutMs)
	e.int(t.CostMs)
	e.bool(t.Late)
	e.b = binary.AppendUvarint(e.b, uint64(len(t.History)))
	for i := range t.History {
		e.record(&t.History[i])
	}
}

// decodeBinChanges calls fn for each change of a binary batch, data
// without its magic. Anyone allowed on apollo.changes.> could have written
// it: every length is checked, and a count is never trusted for an
// allocation. It stops at the first damage; the changes before it have
// gone to fn. A change with a status or kind whose name this build does
// not know, a node of a newer build's in a rolling upgrade, is not
// damage: it is passed over, counted in passed, and the rest read. The
// change cannot be shown as it is (the types have no value for the
// name), and refusing the batch cut every stream client of the node
// (fanIn.deliver) for as long as the upgrade lasted.
func decodeBinChanges(data []byte, fn func(*apollo.Change)) (passed int, err error) {
	d := changeDecoder{batchReader: batchReader{what: "change batch", data: data, size: len(data) + len(changesBinMagic)}}
	for len(d.data) > 0 {
		d.unknown = false
		c := new(apollo.Change)
		d.record(&c.Record)
		var prev apollo.Task
		d.task(&prev)
		c.Prev = apollo.BeforeOf(&prev)
		d.task(&c.Task)
		c.BecameLate = d.bool()
		if d.err != nil {
			return passed, d.err
		}
		if d.unknown {
			passed++
			continue
		}
		c.Record.Tenant = c.Task.Tenant
		fn(c)
	}
	return passed, nil
}

// changeDecoder reads changes, sharing the strings that repeat within
// one (a task's ID and name in its record, Prev and Task) and across a
// batch (its tenant: the subject is per tenant), so that a change costs
// few allocations besides its own.
type changeDecoder struct {
	batchReader
	id, name, tenant string
	unknown          bool // the change has a status or kind this build cannot name
}

// shared reads a string, the same as one of the recent ones when it can.
func (d *changeDecoder) shared() string {
	b := d.bytes()
	switch string(b) {
	case d.id:
		return d.id
	case d.name:
		return d.name
	case d.tenant:
		return d.tenant
	}
	return string(b)
}

func (d *changeDecoder) bool() bool {
	if len(d.data) == 0 || d.data[0] > 1 {
		d.damaged()
		return false
	}
	v := d.data[0] == 1
	d.data = d.data[1:]
	return v
}

func (d *changeDecoder) status() apollo.Status {
	var s apollo.Status
	if err := s.UnmarshalText(d.bytes()); err != nil {
		d.unknown = true
	}
	return s
}

func (d *changeDecoder) record(r *apollo.Record) {
	r.TaskID = d.shared()
	d.id = r.TaskID
	r.Name = d.shared()
	if r.Name != "" {
		d.name = r.Name
	}
	r.Sequence = d.int()
	r.Status = d.status()
	r.Ts = d.int()
	r.ScheduledAt = d.int()
	r.TimeoutMs = d.int()
	r.CostMs = d.int()
	if x := d.bytes(); len(x) > 0 {
		r.Extra = append([]byte(nil), x...)
	}
	if b := d.bytes(); d.err == nil && r.Kind.UnmarshalText(b) != nil {
		d.unknown = true
	}
	r.ReceivedAt = d.int()
	r.Actor = d.str()
	r.Reason = d.str()
}

func (d *changeDecoder) task(t *apollo.Task) {
	t.TaskID = d.shared()
	t.Name = d.shared()
	t.Tenant = d.shared()
	if t.Tenant != "" {
		d.tenant = t.Tenant
	}
	t.Status = d.status()
	t.Sequence = d.int()
	t.ScheduledAt = d.int()
	t.StartedAt = d.int()
	t.FinishedAt = d.int()
	t.CreatedAt = d.int()
	t.UpdatedAt = d.int()
	t.TimeoutMs = d.int()
	t.CostMs = d.int()
	t.Late = d.bool()
	n, k := binary.Uvarint(d.data)
	// A record takes at least a byte per field: a count beyond what is
	// left is damage, not a reason to allocate.
	if k <= 0 || n > uint64(len(d.data)-k) {
		d.damaged()
		return
	}
	d.data = d.data[k:]
	for range n {
		var r apollo.Record
		d.record(&r)
		if d.err != nil {
			return
		}
		r.Tenant = t.Tenant
		t.History = append(t.History, r)
	}
}
