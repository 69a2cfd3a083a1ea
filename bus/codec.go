package bus

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apollo-11/apollo"
)

// Records are encoded compactly for the log, for history and for snapshots:
//
//	version(1) kind(1) status(1)
//	uvarint sequence, ts, scheduledAt, timeoutMs, costMs, receivedAt
//	string tenant, taskID, name, actor, reason, extra   (uvarint length + bytes)
//
// The version byte lets a later release read an older log.
const recordVersion = 1

var errShortRecord = errors.New("bus: record truncated")

// appendRecord appends the encoding of r to b. It never ends with 0xFF,
// the byte the write-ahead log fills ahead with
// (TestRecordNeverEndsWithTheLogsFill).
func appendRecord(b []byte, r *apollo.Record) []byte {
	b = append(b, recordVersion, byte(r.Kind), byte(r.Status))
	for _, v := range [...]int64{r.Sequence, r.Ts, r.ScheduledAt, r.TimeoutMs, r.CostMs, r.ReceivedAt} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	for _, s := range [...]string{r.Tenant, r.TaskID, r.Name, r.Actor, r.Reason} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Extra)))
	return append(b, r.Extra...)
}

// decodeRecord decodes one record from the front of b and returns the rest.
func decodeRecord(b []byte, r *apollo.Record) ([]byte, error) {
	return decodeRecordIn(b, r, nil)
}

// decodeRecordIn is decodeRecord taking the tenant and the job name from
// in (nil: fresh copies): replay then allocates no string for them.
func decodeRecordIn(b []byte, r *apollo.Record, in *interner) ([]byte, error) {
	if len(b) < 3 {
		return nil, errShortRecord
	}
	if b[0] != recordVersion {
		return nil, fmt.Errorf("bus: record version %d, this binary reads %d", b[0], recordVersion)
	}
	*r = apollo.Record{Kind: apollo.Kind(b[1])}
	r.Status = apollo.Status(b[2])
	if !r.Kind.Valid() || !r.Status.Valid() {
		return nil, fmt.Errorf("bus: record with kind %d, status %d", b[1], b[2])
	}
	b = b[3:]
	for _, p := range [...]*int64{&r.Sequence, &r.Ts, &r.ScheduledAt, &r.TimeoutMs, &r.CostMs, &r.ReceivedAt} {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errShortRecord
		}
		*p = int64(v)
		b = b[n:]
	}
	for i, p := range [...]*string{&r.Tenant, &r.TaskID, &r.Name, &r.Actor, &r.Reason} {
		s, rest, err := decodeBytes(b)
		if err != nil {
			return nil, err
		}
		if in != nil && (i == 0 || i == 2) {
			*p = in.bytes(s)
		} else {
			*p = string(s)
		}
		b = rest
	}
	extra, rest, err := decodeBytes(b)
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 {
		r.Extra = append([]byte(nil), extra...)
	}
	return rest, nil
}

func decodeBytes(b []byte) (s, rest []byte, err error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return nil, nil, errShortRecord
	}
	return b[n : n+int(l)], b[n+int(l):], nil
}

// appendHistory adds r to t's history, dropping the oldest records past
// limit. It writes the record format directly, with the tenant, task ID and
// name left empty: they are the task's own and decodeHistory restores them.
func (t *task) appendHistory(r *apollo.Record, limit int) {
	if t.history == nil {
		// Room for a typical run's three records in one allocation: a
		// buffer that grows to fit would save 64 bytes on a task that
		// only reported pending but cost an allocation per run on the
		// ingest path (TestPublishOneEventAllocations).
		t.history = make([]byte, 0, 96)
	}
	t.history = appendHistoryRecord(t.history, r)
	t.nhist++
	for limit > 0 && int(t.nhist) > limit {
		var drop apollo.Record
		rest, err := decodeRecord(t.history, &drop)
		if err != nil {
			t.history, t.nhist = nil, 0
			return
		}
		t.history = append(t.history[:0], rest...)
		t.nhist--
	}
}

// appendHistoryRecord appends r in the record format, with the tenant,
// task ID and name left empty: they are the task's own.
func appendHistoryRecord(b []byte, r *apollo.Record) []byte {
	b = append(b, recordVersion, byte(r.Kind), byte(r.Status))
	for _, v := range [...]int64{r.Sequence, r.Ts, r.ScheduledAt, r.TimeoutMs, r.CostMs, r.ReceivedAt} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = append(b, 0, 0, 0) // tenant, task ID, name: the task's own
	for _, s := range [...]string{r.Actor, r.Reason} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Extra)))
	return append(b, r.Extra...)
}

// decodeHistory returns t's history as records carrying the task's IDs.
func (t *task) decodeHistory(k key) []apollo.Record {
	out := make([]apollo.Record, 0, t.nhist)
	b := t.history
	for len(b) > 0 {
		var r apollo.Record
		rest, err := decodeRecord(b, &r)
		if err != nil {
			break
		}
		r.Tenant, r.TaskID, r.Name = k.tenant, k.id, t.name
		out = append(out, r)
		b = rest
	}
	return out
}
