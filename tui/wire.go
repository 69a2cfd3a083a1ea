package tui

import (
	"encoding/json"

	"github.com/apollo-11/apollo/apiclient"
)

// The dashboard's messages on the stream (docs/stream.md); the server's
// are read with apiclient.DecodeFrame.

// subscribedTypes are the kinds of message the dashboard asks for: job
// metrics come from the REST API instead, for any window and every job
// whatever the task filter.
var subscribedTypes = []string{apiclient.MsgTasks, apiclient.MsgAlert, apiclient.MsgSystem}

func subscribeJSON(prefix, cursor string) []byte {
	return clientJSON(apiclient.ClientMessage{Type: apiclient.MsgSubscribe,
		Filter: &apiclient.Filter{Prefix: prefix, Types: subscribedTypes}, Cursor: cursor})
}

func ackJSON(id string) []byte {
	return clientJSON(apiclient.ClientMessage{Type: apiclient.MsgAck, Alert: id})
}

var heartbeatJSON = clientJSON(apiclient.ClientMessage{Type: apiclient.MsgHeartbeat})

// clientJSON encodes a client message, whose type always encodes.
func clientJSON(m apiclient.ClientMessage) []byte {
	b, _ := json.Marshal(m)
	return b
}
