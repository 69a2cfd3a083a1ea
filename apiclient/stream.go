package apiclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/apollo-11/apollo"
)

// The live stream, GET /api/v1/stream (docs/stream.md): a WebSocket of
// JSON messages, each with a "type". The server encodes the types below;
// a client reads them with DecodeFrame. The WebSocket itself is the
// client's to open (the standard library has none).

// StreamProtocol is the WebSocket subprotocol a client offers.
const StreamProtocol = "apollo.v1"

// Message types. The server sends hello, snapshot, tasks, metric, alert,
// system, heartbeat, ack_result and error; a client sends subscribe, ack
// and heartbeat.
const (
	MsgHello    = "hello"
	MsgSnapshot = "snapshot"
	MsgTasks    = "tasks"
	MsgMetric   = "metric"
	MsgAlert    = "alert"
	// MsgAlertsLost says that alert changes were lost (the server fell
	// behind in a storm): read GET /api/v1/alerts again.
	MsgAlertsLost = "alerts_lost"
	MsgSystem     = "system"
	MsgHeartbeat  = "heartbeat"
	MsgAckResult  = "ack_result"
	MsgError      = "error"

	MsgSubscribe = "subscribe"
	MsgAck       = "ack"
)

// Principal is who the server takes the token for.
type Principal struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Tenant string `json:"tenant,omitempty"`
}

// Hello is the first message of every connection.
type Hello struct {
	Type        string    `json:"type"`
	Protocol    string    `json:"protocol"`
	Cursor      string    `json:"cursor"` // the hub's position now
	ServerTime  int64     `json:"serverTime"`
	HeartbeatMs int64     `json:"heartbeatMs"`
	FlushMs     int64     `json:"flushMs"`
	Principal   Principal `json:"principal"`
}

// Snapshot is the newest tasks that match the filter, newest first: after
// a subscribe without a usable cursor, and whenever the client must
// resync. Error says why it may be partial.
type Snapshot struct {
	Type   string        `json:"type"`
	Cursor string        `json:"cursor"`
	Reason string        `json:"reason"` // subscribe, cursor too old, resync
	Error  string        `json:"error,omitempty"`
	Tasks  []apollo.Task `json:"tasks"`
}

// Tasks is task changes, each task without its history. Resumed marks the
// answer to a subscribe that resumed from a cursor.
type Tasks struct {
	Type    string        `json:"type"`
	Cursor  string        `json:"cursor"`
	Resumed bool          `json:"resumed,omitempty"`
	Tasks   []apollo.Task `json:"tasks"`
}

// Metric is the job metrics of the tenant under the filter's prefix.
type Metric struct {
	Type      string          `json:"type"`
	Prefix    string          `json:"prefix,omitempty"`
	Summaries json.RawMessage `json:"summaries"`
}

// AlertChange is an alert that fired, resolved or was acknowledged.
type AlertChange struct {
	Type  string        `json:"type"`
	Alert *apollo.Alert `json:"alert"`
}

// AlertsLost says that alert changes were lost between the alert
// messages before it and those after: the client reads the alerts again.
type AlertsLost struct {
	Type string `json:"type"`
}

// System is the server's own figures, as GET /api/v1/system has them.
type System struct {
	Type  string          `json:"type"`
	Stats json.RawMessage `json:"stats"`
}

// Heartbeat is the server's proof of life, with the cursor to resume from
// once subscribed; a client echoes it.
type Heartbeat struct {
	Type   string `json:"type"`
	Ts     int64  `json:"ts"`
	Cursor string `json:"cursor,omitempty"`
}

// AckResult answers an ack; Error says why when not OK.
type AckResult struct {
	Type  string `json:"type"`
	Alert string `json:"alert"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// StreamError tells a client what was wrong with a message it sent.
type StreamError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	Field   string `json:"field,omitempty"`
	Hint    string `json:"hint,omitempty"`
}

// ClientMessage is any message a client sends; Type says which fields
// count: subscribe (Filter, Cursor, Coalesce), ack (Alert), heartbeat.
type ClientMessage struct {
	Type     string  `json:"type"`
	Filter   *Filter `json:"filter,omitempty"`
	Cursor   string  `json:"cursor,omitempty"`
	Coalesce *bool   `json:"coalesce,omitempty"` // nil: true
	Alert    string  `json:"alert,omitempty"`
}

// Filter selects what a subscriber receives: tasks whose job name or task
// ID starts with Prefix, in any of Status (none: all), and the kinds of
// message in Types (tasks, metric, alert, system; none: all).
type Filter struct {
	Prefix string   `json:"prefix,omitempty"`
	Status []string `json:"status,omitempty"`
	Types  []string `json:"types"`
}

// Frame is one server message, decoded: its type, and the message, one of
// *Hello, *Snapshot, *Tasks, *Metric, *AlertChange, *AlertsLost, *System, *Heartbeat,
// *AckResult and *StreamError; nil for a type this client does not know.
type Frame struct {
	Type string
	Msg  any
}

// newMessage makes an empty message of each type the server sends.
var newMessage = map[string]func() any{
	MsgHello:      func() any { return new(Hello) },
	MsgSnapshot:   func() any { return new(Snapshot) },
	MsgTasks:      func() any { return new(Tasks) },
	MsgMetric:     func() any { return new(Metric) },
	MsgAlert:      func() any { return new(AlertChange) },
	MsgAlertsLost: func() any { return new(AlertsLost) },
	MsgSystem:     func() any { return new(System) },
	MsgHeartbeat:  func() any { return new(Heartbeat) },
	MsgAckResult:  func() any { return new(AckResult) },
	MsgError:      func() any { return new(StreamError) },
}

// DecodeFrame reads one server message. A message of a type this client
// does not know decodes without error (Type tells), so that a newer
// server can add types; a malformed one is an error.
func DecodeFrame(data []byte) (Frame, error) {
	f := Frame{Type: frameType(data)}
	if f.Type == "" {
		return Frame{}, errors.New("decoding a stream message: not an object with a type")
	}
	mk, ok := newMessage[f.Type]
	if !ok {
		if !json.Valid(data) {
			return Frame{}, fmt.Errorf("decoding a stream message of type %q: not JSON", f.Type)
		}
		return f, nil
	}
	f.Msg = mk()
	if err := json.Unmarshal(data, f.Msg); err != nil {
		return Frame{}, fmt.Errorf("decoding a stream message of type %q: %w", f.Type, err)
	}
	// Every message's first field is its Type; "type" given twice reads
	// as the first in the first bytes, as the last in the decoding.
	if reflect.ValueOf(f.Msg).Elem().Field(0).String() != f.Type {
		return Frame{}, fmt.Errorf("decoding a stream message of type %q: it names two types", f.Type)
	}
	return f, f.check()
}

// check refuses what no server sends and a client could not use.
func (f *Frame) check() error {
	var tasks []apollo.Task
	switch m := f.Msg.(type) {
	case *AlertChange:
		if m.Alert == nil || m.Alert.ID == "" {
			return errors.New("decoding a stream message of type \"alert\": the alert has no ID")
		}
	case *Snapshot:
		tasks = m.Tasks
	case *Tasks:
		tasks = m.Tasks
	}
	for i := range tasks {
		if tasks[i].TaskID == "" {
			return fmt.Errorf("decoding a stream message of type %q: task %d has no taskID", f.Type, i)
		}
	}
	return nil
}

// typePrefix is how the server begins every message.
var typePrefix = []byte(`{"type":"`)

// frameType is a message's type: read from the first bytes when the
// message starts as the server writes it, else from a decoding of its type
// alone (what follows is checked by the decoding of the whole message).
func frameType(data []byte) string {
	if rest, ok := bytes.CutPrefix(data, typePrefix); ok {
		if end := bytes.IndexByte(rest, '"'); end > 0 && bytes.IndexByte(rest[:end], '\\') < 0 {
			return string(rest[:end])
		}
	}
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &t) != nil {
		return ""
	}
	return t.Type
}
