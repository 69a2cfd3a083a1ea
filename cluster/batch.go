package cluster

import (
	"encoding/binary"
	"fmt"

	"github.com/apollo-11/apollo"
)

// batchMagic starts an events-stream message that holds a batch of
// events written by a node. It cannot start JSON, so the owner tells a
// batch from an agent's single event by its first byte.
const batchMagic = "\x00AB1"

// appendBatchEvent appends one event to a batch payload, which starts with
// batchMagic: the fields the owner reads, each a uvarint length and bytes
// or a zigzag varint; the status by its wire name. The tenant is not in it
// (the subject holds it). Events encoded alone can be joined into one
// batch (ingest.go coalesces requests so). JSON both ways cost a node
// as much CPU per event as the single server's whole path (profile in
// docs/benchmarks.md); this costs a few dozen nanoseconds.
func appendBatchEvent(b []byte, ev *apollo.Event) []byte {
	b = appendString(b, ev.TaskID)
	b = appendString(b, ev.Name)
	b = binary.AppendVarint(b, ev.Sequence)
	b = appendString(b, ev.Status.String()) // its wire name: stable across releases, unlike its number
	b = binary.AppendVarint(b, ev.Ts)
	b = binary.AppendVarint(b, ev.ScheduledAt)
	b = binary.AppendVarint(b, ev.TimeoutMs)
	b = binary.AppendVarint(b, ev.CostMs)
	return appendString(b, string(ev.Extra))
}

// batchEventSize is the length appendBatchEvent appends.
func batchEventSize(ev *apollo.Event) int {
	return stringSize(ev.TaskID) + stringSize(ev.Name) + varintLen(ev.Sequence) +
		stringSize(ev.Status.String()) + varintLen(ev.Ts) + varintLen(ev.ScheduledAt) +
		varintLen(ev.TimeoutMs) + varintLen(ev.CostMs) + stringSize(string(ev.Extra))
}

func stringSize(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func varintLen(v int64) int {
	u := uint64(v) << 1 // binary.AppendVarint's zig-zag form
	if v < 0 {
		u = ^u
	}
	return uvarintLen(u)
}

func uvarintLen(u uint64) int {
	n := 1
	for ; u >= 0x80; u >>= 7 {
		n++
	}
	return n
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// isBatch says whether an events-stream payload is a node's batch.
func isBatch(data []byte) bool {
	return hasMagic(data, batchMagic)
}

// decodeBatch calls fn for each event of a batch payload, in order. It is
// the decoder of data read back from JetStream, which anyone allowed to
// publish on the subject could have written, so it checks every length
// and stops at the first damage; fn checks the events themselves. An
// event whose status this build has no name for (a node of a newer build
// wrote the batch, in a rolling upgrade) is not damage: its fields all
// have their lengths, so the decoder reads on past it, hands it to pass
// with why, and goes on with the rest. Before, it ended the batch there,
// and the events after it, which the forwarding node had answered
// accepted, were lost.
func decodeBatch(data []byte, fn func(ev apollo.Event), pass func(ev apollo.Event, err error)) error {
	if !isBatch(data) {
		return fmt.Errorf("cluster: not an event batch (it must start with %q)", batchMagic)
	}
	r := batchReader{what: "event batch", data: data[len(batchMagic):], size: len(data)}
	for len(r.data) > 0 {
		var ev apollo.Event
		ev.TaskID = r.str()
		ev.Name = r.str()
		ev.Sequence = r.int()
		status := r.str()
		ev.Ts = r.int()
		ev.ScheduledAt = r.int()
		ev.TimeoutMs = r.int()
		ev.CostMs = r.int()
		if x := r.str(); x != "" {
			ev.Extra = []byte(x)
		}
		if r.err != nil {
			return r.err
		}
		var err error
		if ev.Status, err = apollo.ParseStatus(status); err != nil {
			pass(ev, fmt.Errorf("cluster: event batch: event %s:%d: %w", ev.TaskID, ev.Sequence, err))
			continue
		}
		fn(ev)
	}
	return nil
}

// batchReader reads the fields of a batch of events or of changes.
type batchReader struct {
	what string // for errors: "event batch"
	data []byte
	size int
	err  error
}

func (r *batchReader) damaged() {
	if r.err == nil {
		r.err = fmt.Errorf("cluster: %s damaged at byte %d of %d", r.what, r.size-len(r.data), r.size)
	}
	r.data = nil
}

func (r *batchReader) str() string { return string(r.bytes()) }

// bytes is a field as str reads it, not copied.
func (r *batchReader) bytes() []byte {
	n, k := binary.Uvarint(r.data)
	if k <= 0 || n > uint64(len(r.data)-k) {
		r.damaged()
		return nil
	}
	b := r.data[k : k+int(n)]
	r.data = r.data[k+int(n):]
	return b
}

func (r *batchReader) int() int64 {
	v, k := binary.Varint(r.data)
	if k <= 0 {
		r.damaged()
		return 0
	}
	r.data = r.data[k:]
	return v
}
