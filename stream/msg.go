package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

// maxClientMessage bounds what a client may send in one message: a
// subscribe or an ack is a few hundred bytes.
const maxClientMessage = 16 << 10

// Message kinds a client may select with filter.types. Control messages
// (hello, snapshot, heartbeat, ack_result, error) always come.
const (
	wantTasks uint8 = 1 << iota
	wantMetric
	wantAlert
	wantSystem

	wantAll = wantTasks | wantMetric | wantAlert | wantSystem
)

var typeBits = map[string]uint8{
	apiclient.MsgTasks: wantTasks, "task": wantTasks, // the issue says "task"; both are accepted
	apiclient.MsgMetric: wantMetric, "metrics": wantMetric,
	apiclient.MsgAlert: wantAlert, "alerts": wantAlert,
	apiclient.MsgSystem: wantSystem,
}

// streamFilter selects what one client receives.
type streamFilter struct {
	prefix   string
	statuses uint8 // bit per apollo.Status; 0 = every status
	types    uint8 // want* bits; never 0 after parsing
}

// matchTask reports whether f selects a change of a task; sts has the bit
// of the task's status and of the status it had before the change: a
// client that keeps failed tasks hears of one that is failed no longer (a
// correction), and a client that keeps running tasks of one that
// finished, in its new state. Without it such a task stayed in the
// client's view as it was, for ever.
func (f *streamFilter) matchTask(name, taskID string, sts uint8) bool {
	if f.statuses != 0 && f.statuses&sts == 0 {
		return false
	}
	return f.prefix == "" || strings.HasPrefix(name, f.prefix) || strings.HasPrefix(taskID, f.prefix)
}

// statusList returns the selected statuses in lifecycle order, or nil for
// every status.
func (f *streamFilter) statusList() []apollo.Status {
	if f.statuses == 0 {
		return nil
	}
	var out []apollo.Status
	for _, s := range apollo.Statuses() {
		if f.statuses&(1<<s) != 0 {
			out = append(out, s)
		}
	}
	return out
}

// key is the same for clients that may share every message.
func (f *streamFilter) key(tenant string, coalesce bool) string {
	return fmt.Sprintf("%q/%q/%d/%d/%t", tenant, f.prefix, f.statuses, f.types, coalesce)
}

// request is a decoded, checked client message.
type request struct {
	typ      string
	filter   streamFilter
	cursor   string
	coalesce bool
	alert    string
}

// decodeRequest parses and checks one client message. Errors are
// *apollo.Error naming the field, so that the client's author can fix it.
func decodeRequest(data []byte) (request, error) {
	var m apiclient.ClientMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return request{}, &apollo.Error{Code: apollo.EINVALID, Message: "not a JSON object: " + err.Error(),
			Hint: `send {"type":"subscribe",...} or {"type":"ack","alert":"ID"}`}
	}
	switch m.Type {
	case apiclient.MsgSubscribe:
		r := request{typ: apiclient.MsgSubscribe, cursor: m.Cursor, coalesce: m.Coalesce == nil || *m.Coalesce, filter: streamFilter{types: wantAll}}
		if len(m.Cursor) > 64 {
			return request{}, &apollo.Error{Code: apollo.EINVALID, Field: "cursor", Message: "longer than any cursor this server sends", Hint: "send back a cursor unchanged"}
		}
		if m.Filter == nil {
			return r, nil
		}
		if len(m.Filter.Prefix) > apollo.MaxNameBytes {
			return request{}, &apollo.Error{Code: apollo.EINVALID, Field: "filter.prefix", Message: fmt.Sprintf("over %d bytes", apollo.MaxNameBytes)}
		}
		r.filter.prefix = m.Filter.Prefix
		for _, s := range m.Filter.Status {
			st, err := apollo.ParseStatus(s)
			if err != nil {
				e, ok := errors.AsType[*apollo.Error](err)
				if !ok {
					return request{}, err
				}
				named := *e
				named.Field = "filter.status"
				return request{}, &named
			}
			r.filter.statuses |= 1 << st
		}
		if len(m.Filter.Types) > 0 {
			r.filter.types = 0
			for _, t := range m.Filter.Types {
				bit, ok := typeBits[t]
				if !ok {
					return request{}, &apollo.Error{Code: apollo.EINVALID, Field: "filter.types", Message: "unknown type " + strconv.Quote(t),
						Hint: "use tasks, metric, alert or system"}
				}
				r.filter.types |= bit
			}
		}
		return r, nil
	case apiclient.MsgHeartbeat: // a client's echo: proof of life where pings do not pass
		return request{typ: apiclient.MsgHeartbeat}, nil
	case apiclient.MsgAck:
		if m.Alert == "" || len(m.Alert) > 256 {
			return request{}, &apollo.Error{Code: apollo.EINVALID, Field: "alert", Message: "missing or too long", Hint: `send {"type":"ack","alert":"<the alert's id>"}`}
		}
		return request{typ: apiclient.MsgAck, alert: m.Alert}, nil
	case "":
		return request{}, &apollo.Error{Code: apollo.EINVALID, Field: "type", Message: "missing", Hint: "use subscribe, ack or heartbeat"}
	default:
		return request{}, &apollo.Error{Code: apollo.EINVALID, Field: "type", Message: "unknown message type " + strconv.Quote(m.Type), Hint: "use subscribe, ack or heartbeat"}
	}
}

// Server -> client messages are apiclient's types, encoded with
// encoding/json; the high-volume tasks and snapshot messages
// (apiclient.Tasks, apiclient.Snapshot) are assembled from pre-encoded
// tasks instead (appendTasksMsg).

// mustJSON encodes server messages, whose types always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("stream: encoding a message: %v", err))
	}
	return b
}

// appendTasksMsg writes {"type":T,"cursor":C,[extra,]"tasks":[...]} from
// tasks that are already JSON, so a message shared by many clients is
// assembled once and no task is encoded twice.
func appendTasksMsg(dst []byte, typ, cursor, extra string, tasks [][]byte) []byte {
	dst, _ = appendTasksHead(dst, typ, cursor, extra)
	for i, t := range tasks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, t...)
	}
	return append(dst, "]}"...)
}

// appendTasksHead writes a tasks message up to the opening of its tasks
// array, and returns where the array's content starts: the caller appends
// the tasks, comma-separated, and "]}".
func appendTasksHead(dst []byte, typ, cursor, extra string) ([]byte, int) {
	dst = append(dst, `{"type":"`...)
	dst = append(dst, typ...)
	dst = append(dst, `","cursor":"`...)
	dst = append(dst, cursor...)
	dst = append(dst, '"')
	if extra != "" {
		dst = append(dst, ',')
		dst = append(dst, extra...)
	}
	dst = append(dst, `,"tasks":[`...)
	return dst, len(dst)
}

// statusBits has the bit of the task's status after the change and of
// its status before (none for a new task), as streamFilter.statuses.
func statusBits(c *apollo.Change) uint8 {
	b := uint8(1) << c.Task.Status
	if c.Prev.Status != apollo.StatusNone {
		b |= 1 << c.Prev.Status
	}
	return b
}
