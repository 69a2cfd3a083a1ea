package tui

import (
	"encoding/json"
	"fmt"

	"github.com/apollo-11/apollo"
)

// Server message types of the stream (docs/stream.md).
const (
	frameHello     = "hello"
	frameSnapshot  = "snapshot"
	frameTasks     = "tasks"
	frameMetric    = "metric"
	frameAlert     = "alert"
	frameSystem    = "system"
	frameHeartbeat = "heartbeat"
	frameAckResult = "ack_result"
	frameError     = "error"
)

// principal is who the server says the token belongs to.
type principal struct {
	Name   string `json:"name"`
	Role   string `json:"role"`
	Tenant string `json:"tenant,omitempty"`
}

// frame is one server message, decoded. Which fields are set depends on
// Type; Alert is the alert of an alert message and AlertID the alert of an
// ack_result (the wire uses one name for both).
type frame struct {
	Type        string
	Cursor      string
	HeartbeatMs int64
	Principal   principal
	Reason      string
	Resumed     bool
	Tasks       []apollo.Task
	Alert       apollo.Alert
	AlertID     string
	Stats       json.RawMessage
	OK          bool
	Error       string // ack_result's error, or why a snapshot is partial
	Message     string // error messages
	Hint        string
}

// wireFrame is the union of every server message's fields.
type wireFrame struct {
	Type        string          `json:"type"`
	Cursor      string          `json:"cursor"`
	HeartbeatMs int64           `json:"heartbeatMs"`
	Principal   principal       `json:"principal"`
	Reason      string          `json:"reason"`
	Resumed     bool            `json:"resumed"`
	Tasks       []apollo.Task   `json:"tasks"`
	Alert       json.RawMessage `json:"alert"`
	Stats       json.RawMessage `json:"stats"`
	OK          bool            `json:"ok"`
	Error       string          `json:"error"`
	Message     string          `json:"message"`
	Hint        string          `json:"hint"`
}

// decodeFrame reads one server message. A message of a type this client
// does not know decodes without error (Type tells), so a newer server can
// add types; a malformed message is an error.
func decodeFrame(data []byte) (frame, error) {
	var w wireFrame
	if err := json.Unmarshal(data, &w); err != nil {
		return frame{}, fmt.Errorf("decoding a stream message: %w", err)
	}
	if w.Type == "" {
		return frame{}, fmt.Errorf("decoding a stream message: no type")
	}
	f := frame{Type: w.Type, Cursor: w.Cursor, HeartbeatMs: w.HeartbeatMs, Principal: w.Principal,
		Reason: w.Reason, Resumed: w.Resumed, Tasks: w.Tasks, Stats: w.Stats, OK: w.OK,
		Error: w.Error, Message: w.Message, Hint: w.Hint}
	switch w.Type {
	case frameAlert:
		if err := json.Unmarshal(w.Alert, &f.Alert); err != nil || f.Alert.ID == "" {
			return frame{}, fmt.Errorf("decoding an alert message: the alert has no ID or is not an object")
		}
	case frameAckResult:
		if err := json.Unmarshal(w.Alert, &f.AlertID); err != nil {
			return frame{}, fmt.Errorf("decoding an ack_result: alert is not a string")
		}
	}
	for i := range f.Tasks {
		if f.Tasks[i].TaskID == "" {
			return frame{}, fmt.Errorf("decoding a %s message: task %d has no taskID", w.Type, i)
		}
	}
	return f, nil
}

// Client messages.

type subscribeFilter struct {
	Prefix string   `json:"prefix,omitempty"`
	Types  []string `json:"types"`
}

type subscribeMsg struct {
	Type   string          `json:"type"`
	Filter subscribeFilter `json:"filter"`
	Cursor string          `json:"cursor,omitempty"`
}

type ackMsg struct {
	Type  string `json:"type"`
	Alert string `json:"alert"`
}

// subscribedTypes are the kinds of message the dashboard asks for: job
// metrics come from the REST API instead, for any window and every job
// whatever the task filter.
var subscribedTypes = []string{frameTasks, frameAlert, frameSystem}

func subscribeJSON(prefix, cursor string) []byte {
	b, _ := json.Marshal(subscribeMsg{Type: "subscribe", Filter: subscribeFilter{Prefix: prefix, Types: subscribedTypes}, Cursor: cursor})
	return b
}

func ackJSON(id string) []byte {
	b, _ := json.Marshal(ackMsg{Type: "ack", Alert: id})
	return b
}

var heartbeatJSON = []byte(`{"type":"heartbeat"}`)
