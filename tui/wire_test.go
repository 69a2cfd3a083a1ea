package tui

import (
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

func TestClientMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got  []byte
		want string
	}{
		{subscribeJSON("", "", false), `{"type":"subscribe","filter":{"types":["tasks","alert"]}}`},
		{subscribeJSON("", "", true), `{"type":"subscribe","filter":{"types":["tasks","alert","system"]}}`},
		{subscribeJSON("batch_", "c.9", false), `{"type":"subscribe","filter":{"prefix":"batch_","types":["tasks","alert"]},"cursor":"c.9"}`},
		{ackJSON("a-1"), `{"type":"ack","alert":"a-1"}`},
		{heartbeatJSON, `{"type":"heartbeat"}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("got %s\nwant %s", tt.got, tt.want)
		}
	}
}

// FuzzDecodeFrame: whatever a server sends that decodes (apiclient's
// FuzzDecodeFrame checks the decoding) survives the dashboard's handling.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		helloJSON("c.1"), snapshotJSON("c.2", fixtureTasks()), alertJSON(fixtureAlerts()[2]),
		`{"type":"ack_result","alert":"a","ok":true}`, `{"type":"system","stats":` + fixtureSystem + `}`,
		`{"type":"heartbeat","ts":1,"cursor":"c"}`, `{"type":"error","message":"m"}`, `{"type":"tasks","tasks":null}`,
		`{}`, `[]`, `null`, `{"type":"alert","alert":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := apiclient.DecodeFrame(data)
		if err != nil {
			return
		}
		m, err := New(Options{Clock: apollo.NewFakeClock(t0)})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		m.width, m.height = 80, 24
		m.resize()
		m.Update(frameMsg{gen: m.conn.gen, f: fr})
		for tb := range numTabs {
			m.tab = tb
			_ = m.render()
		}
	})
}
