package tui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apollo-11/apollo"
)

func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		check func(t *testing.T, f frame)
		err   string
	}{
		{name: "hello", in: helloJSON("c.1"), check: func(t *testing.T, f frame) {
			if f.Type != frameHello || f.Cursor != "c.1" || f.HeartbeatMs != 15000 || f.Principal.Name != "oscar" || f.Principal.Role != "operator" {
				t.Errorf("%+v", f)
			}
		}},
		{name: "snapshot", in: snapshotJSON("c.7", fixtureTasks()[:2]), check: func(t *testing.T, f frame) {
			if len(f.Tasks) != 2 || f.Tasks[1].Status != apollo.StatusFailed || f.Tasks[1].CostMs != 55_000 || f.Reason != "subscribe" {
				t.Errorf("%+v", f)
			}
		}},
		{name: "resumed tasks", in: `{"type":"tasks","cursor":"x.3","resumed":true,"tasks":[]}`, check: func(t *testing.T, f frame) {
			if !f.Resumed || f.Cursor != "x.3" {
				t.Errorf("%+v", f)
			}
		}},
		{name: "alert", in: alertJSON(fixtureAlerts()[0]), check: func(t *testing.T, f frame) {
			if f.Alert.ID != "a-1" || f.Alert.State != apollo.AlertFiring || f.Alert.FiredAt.IsZero() {
				t.Errorf("%+v", f.Alert)
			}
		}},
		{name: "ack_result", in: `{"type":"ack_result","alert":"a-1","ok":false,"error":"no"}`, check: func(t *testing.T, f frame) {
			if f.AlertID != "a-1" || f.OK || f.Error != "no" {
				t.Errorf("%+v", f)
			}
		}},
		{name: "system", in: `{"type":"system","stats":{"bus":{"accepted":3}}}`, check: func(t *testing.T, f frame) {
			if !strings.Contains(string(f.Stats), `"accepted":3`) {
				t.Errorf("%s", f.Stats)
			}
		}},
		{name: "error", in: `{"type":"error","message":"unknown type","code":"invalid","field":"type","hint":"use subscribe"}`, check: func(t *testing.T, f frame) {
			if f.Message != "unknown type" || f.Hint != "use subscribe" {
				t.Errorf("%+v", f)
			}
		}},
		{name: "unknown type passes", in: `{"type":"future","x":1}`, check: func(t *testing.T, f frame) {
			if f.Type != "future" {
				t.Errorf("%+v", f)
			}
		}},
		{name: "not JSON", in: `{"type":`, err: "decoding a stream message"},
		{name: "no type", in: `{"cursor":"c"}`, err: "no type"},
		{name: "alert without ID", in: `{"type":"alert","alert":{"rule":"r"}}`, err: "no ID"},
		{name: "alert not an object", in: `{"type":"alert","alert":"a-1"}`, err: "no ID"},
		{name: "ack_result with an object", in: `{"type":"ack_result","alert":{"id":"a"}}`, err: "not a string"},
		{name: "task without ID", in: `{"type":"tasks","cursor":"c","tasks":[{"name":"x"}]}`, err: "no taskID"},
		{name: "bad status", in: `{"type":"tasks","cursor":"c","tasks":[{"taskID":"t","status":"done"}]}`, err: "decoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := decodeFrame([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}

func TestClientMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		got  []byte
		want string
	}{
		{subscribeJSON("", ""), `{"type":"subscribe","filter":{"types":["tasks","alert","system"]}}`},
		{subscribeJSON("batch_", "c.9"), `{"type":"subscribe","filter":{"prefix":"batch_","types":["tasks","alert","system"]},"cursor":"c.9"}`},
		{ackJSON("a-1"), `{"type":"ack","alert":"a-1"}`},
		{heartbeatJSON, `{"type":"heartbeat"}`},
	}
	for _, tt := range tests {
		if string(tt.got) != tt.want {
			t.Errorf("got %s\nwant %s", tt.got, tt.want)
		}
	}
}

// FuzzDecodeFrame: any bytes decode to a frame or an error, never a
// panic, and a frame that decodes has a type, and tasks with IDs.
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
		fr, err := decodeFrame(data)
		if err != nil {
			return
		}
		if fr.Type == "" {
			t.Fatal("a frame without a type decoded")
		}
		for _, task := range fr.Tasks {
			if task.TaskID == "" {
				t.Fatal("a task without an ID decoded")
			}
		}
		if fr.Type == frameAlert && fr.Alert.ID == "" {
			t.Fatal("an alert without an ID decoded")
		}
		// What decoded must survive the dashboard's handling.
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
		_, _ = json.Marshal(fr.Tasks)
	})
}
