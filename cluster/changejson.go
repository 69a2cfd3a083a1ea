package cluster

import (
	"encoding/json"
	"strconv"

	"github.com/apollo-11/apollo"
)

// appendChangeJSON appends json.Marshal(c) to b, byte for byte, without
// reflection or allocation for the common change: every string plain ASCII
// needing no escape, no extra, statuses and kinds valid. Anything else goes
// through json.Marshal. Encoding each applied change by reflection was a
// tenth of a node's CPU (docs/benchmarks.md), and a fresh buffer per change
// most of what was left. TestMarshalChangeMatchesJSON and FuzzMarshalChange
// hold it to json.Marshal; TestChangeFieldsKnown fails when a field is
// added to the types it writes. On an error b is returned as it was.
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

// statusPlain: what Status.MarshalText writes without an error.
func statusPlain(s apollo.Status) bool { return s == apollo.StatusNone || s.Valid() }

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

func statusText(s apollo.Status) string {
	if s == apollo.StatusNone {
		return ""
	}
	return s.String()
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
