package tui

import (
	"encoding/json"
	"strings"

	"github.com/apollo-11/apollo/apiclient"
)

// The dashboard's messages on the stream (docs/stream.md); the server's
// are read with apiclient.DecodeFrame.

// subscribeJSON asks for the kinds of message the dashboard shows: the
// tasks (the Tasks tab keeps them whatever tab is shown), the alerts (the
// tab bar counts the firing ones) and, when system is set (the System
// tab is shown), the system message. Job metrics come from the REST API
// instead, for any window and every job whatever the task filter.
func subscribeJSON(prefix, cursor string, system bool) []byte {
	types := []string{apiclient.MsgTasks, apiclient.MsgAlert}
	if system {
		types = append(types, apiclient.MsgSystem)
	}
	return clientJSON(apiclient.ClientMessage{Type: apiclient.MsgSubscribe,
		Filter: &apiclient.Filter{Prefix: prefix, Types: types}, Cursor: cursor})
}

func ackJSON(id string) []byte {
	return clientJSON(apiclient.ClientMessage{Type: apiclient.MsgAck, Alert: id})
}

// refusesSubscribe reports whether an error message answers a subscribe:
// the server names the field of the subscribe it could not use (cursor,
// filter.prefix, filter.status, filter.types) and keeps the filter it
// had. The dashboard's other messages, an ack or a heartbeat, are not
// answered with those.
func refusesSubscribe(e *apiclient.StreamError) bool {
	return e.Field == "cursor" || strings.HasPrefix(e.Field, "filter.")
}

var heartbeatJSON = clientJSON(apiclient.ClientMessage{Type: apiclient.MsgHeartbeat})

// clientJSON encodes a client message, whose type always encodes.
func clientJSON(m apiclient.ClientMessage) []byte {
	b, _ := json.Marshal(m)
	return b
}
