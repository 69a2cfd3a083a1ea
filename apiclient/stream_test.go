package apiclient

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
		check func(t *testing.T, f Frame)
		err   string
	}{
		{name: "hello", in: `{"type":"hello","protocol":"apollo.v1","cursor":"c.1","serverTime":1,"heartbeatMs":15000,"flushMs":100,"principal":{"name":"oscar","role":"operator"}}`,
			check: func(t *testing.T, f Frame) {
				if f.Type != MsgHello || f.Hello.Cursor != "c.1" || f.Hello.HeartbeatMs != 15000 || f.Hello.Principal.Name != "oscar" || f.Hello.Principal.Role != "operator" {
					t.Errorf("%+v", f.Hello)
				}
			}},
		{name: "snapshot", in: `{"type":"snapshot","cursor":"c.7","reason":"subscribe","tasks":[{"taskID":"a","status":"running"},{"taskID":"b","status":"failed","costMs":55000}]}`,
			check: func(t *testing.T, f Frame) {
				s := f.Snapshot
				if len(s.Tasks) != 2 || s.Tasks[1].Status != apollo.StatusFailed || s.Tasks[1].CostMs != 55_000 || s.Reason != "subscribe" || s.Cursor != "c.7" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "resumed tasks", in: `{"type":"tasks","cursor":"x.3","resumed":true,"tasks":[]}`, check: func(t *testing.T, f Frame) {
			if !f.Tasks.Resumed || f.Tasks.Cursor != "x.3" {
				t.Errorf("%+v", f.Tasks)
			}
		}},
		{name: "alert", in: `{"type":"alert","alert":{"id":"a-1","rule":"r","state":"firing","firedAt":"2026-11-29T10:00:00Z"}}`, check: func(t *testing.T, f Frame) {
			if a := f.Alert.Alert; a.ID != "a-1" || a.State != apollo.AlertFiring || a.FiredAt.IsZero() {
				t.Errorf("%+v", a)
			}
		}},
		{name: "ack_result", in: `{"type":"ack_result","alert":"a-1","ok":false,"error":"no"}`, check: func(t *testing.T, f Frame) {
			if r := f.AckResult; r.Alert != "a-1" || r.OK || r.Error != "no" {
				t.Errorf("%+v", r)
			}
		}},
		{name: "system", in: `{"type":"system","stats":{"bus":{"accepted":3}}}`, check: func(t *testing.T, f Frame) {
			if !strings.Contains(string(f.System.Stats), `"accepted":3`) {
				t.Errorf("%s", f.System.Stats)
			}
		}},
		{name: "metric", in: `{"type":"metric","prefix":"etl","summaries":{"jobs":[]}}`, check: func(t *testing.T, f Frame) {
			if f.Metric.Prefix != "etl" || string(f.Metric.Summaries) != `{"jobs":[]}` {
				t.Errorf("%+v", f.Metric)
			}
		}},
		{name: "heartbeat", in: `{"type":"heartbeat","ts":5,"cursor":"c.9"}`, check: func(t *testing.T, f Frame) {
			if f.Heartbeat.Ts != 5 || f.Heartbeat.Cursor != "c.9" {
				t.Errorf("%+v", f.Heartbeat)
			}
		}},
		{name: "error", in: `{"type":"error","message":"unknown type","code":"invalid","field":"type","hint":"use subscribe"}`, check: func(t *testing.T, f Frame) {
			if f.Error.Message != "unknown type" || f.Error.Hint != "use subscribe" || f.Error.Field != "type" {
				t.Errorf("%+v", f.Error)
			}
		}},
		{name: "type not first", in: ` {"cursor":"c","type":"heartbeat","ts":1}`, check: func(t *testing.T, f Frame) {
			if f.Heartbeat == nil || f.Heartbeat.Ts != 1 {
				t.Errorf("%+v", f)
			}
		}},
		{name: "unknown type passes", in: `{"type":"future","x":1}`, check: func(t *testing.T, f Frame) {
			if f.Type != "future" || f.Hello != nil || f.Tasks != nil {
				t.Errorf("%+v", f)
			}
		}},
		{name: "not JSON", in: `{"type":`, err: "decoding a stream message"},
		{name: "unknown type, not JSON", in: `{"type":"future",`, err: "not JSON"},
		{name: "no type", in: `{"cursor":"c"}`, err: "with a type"},
		{name: "two types", in: `{"type":"hello","type":"tasks"}`, err: "two types"},
		{name: "alert without ID", in: `{"type":"alert","alert":{"rule":"r"}}`, err: "no ID"},
		{name: "alert not an object", in: `{"type":"alert","alert":"a-1"}`, err: `of type "alert": json`},
		{name: "alert null", in: `{"type":"alert","alert":null}`, err: "no ID"},
		{name: "ack_result with an object", in: `{"type":"ack_result","alert":{"id":"a"}}`, err: `of type "ack_result": json`},
		{name: "task without ID", in: `{"type":"tasks","cursor":"c","tasks":[{"name":"x"}]}`, err: "no taskID"},
		{name: "snapshot task without ID", in: `{"type":"snapshot","cursor":"c","tasks":[{"name":"x"}]}`, err: "no taskID"},
		{name: "bad status", in: `{"type":"tasks","cursor":"c","tasks":[{"taskID":"t","status":"done"}]}`, err: "decoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := DecodeFrame([]byte(tt.in))
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

// TestClientMessage: what a client sends is what the server reads
// (docs/stream.md): a subscribe with its filter, an ack, an echo.
func TestClientMessage(t *testing.T) {
	t.Parallel()
	no := false
	tests := []struct {
		m    ClientMessage
		want string
	}{
		{ClientMessage{Type: MsgSubscribe, Filter: &Filter{Types: []string{MsgTasks}}}, `{"type":"subscribe","filter":{"types":["tasks"]}}`},
		{ClientMessage{Type: MsgSubscribe, Filter: &Filter{Prefix: "etl_", Status: []string{"failed"}, Types: []string{MsgAlert}}, Cursor: "c.9", Coalesce: &no},
			`{"type":"subscribe","filter":{"prefix":"etl_","status":["failed"],"types":["alert"]},"cursor":"c.9","coalesce":false}`},
		{ClientMessage{Type: MsgAck, Alert: "a-1"}, `{"type":"ack","alert":"a-1"}`},
		{ClientMessage{Type: MsgHeartbeat}, `{"type":"heartbeat"}`},
	}
	for _, tt := range tests {
		if b, _ := json.Marshal(tt.m); string(b) != tt.want {
			t.Errorf("got %s\nwant %s", b, tt.want)
		}
	}
}

// FuzzDecodeFrame: any bytes decode to a frame or an error, never a
// panic; a frame that decodes has a type and the message of that type
// alone, tasks with IDs and an alert with one; and the message, encoded
// again, decodes to the same type.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","protocol":"apollo.v1","cursor":"c.1","principal":{"name":"n","role":"viewer"}}`,
		`{"type":"snapshot","cursor":"c.2","reason":"subscribe","tasks":[{"taskID":"a","status":"pending","extra":{"k":1}}]}`,
		`{"type":"alert","alert":{"id":"a","labels":{"x":"y"}}}`, `{"type":"ack_result","alert":"a","ok":true}`,
		`{"type":"system","stats":{"bus":{}}}`, `{"type":"heartbeat","ts":1,"cursor":"c"}`, `{"type":"error","message":"m"}`,
		`{"type":"tasks","tasks":null}`, `{"type":"metric","summaries":null}`, `{}`, `[]`, `null`, `{"type":"alert","alert":null}`,
		`{"type":"x\"y"}`, `{"type":"hello","type":"hello"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := DecodeFrame(data)
		if err != nil {
			return
		}
		if fr.Type == "" {
			t.Fatal("a frame without a type decoded")
		}
		msgs := map[string]any{MsgHello: fr.Hello, MsgSnapshot: fr.Snapshot, MsgTasks: fr.Tasks, MsgMetric: fr.Metric,
			MsgAlert: fr.Alert, MsgSystem: fr.System, MsgHeartbeat: fr.Heartbeat, MsgAckResult: fr.AckResult, MsgError: fr.Error}
		var msg any
		for typ, m := range msgs {
			set := !isNil(m)
			if set != (typ == fr.Type) {
				t.Fatalf("type %q with the %s message set: %t", fr.Type, typ, set)
			}
			if set {
				msg = m
			}
		}
		var tasks []apollo.Task
		switch {
		case fr.Tasks != nil:
			tasks = fr.Tasks.Tasks
		case fr.Snapshot != nil:
			tasks = fr.Snapshot.Tasks
		case fr.Alert != nil && fr.Alert.Alert.ID == "":
			t.Fatal("an alert without an ID decoded")
		}
		for _, task := range tasks {
			if task.TaskID == "" {
				t.Fatal("a task without an ID decoded")
			}
		}
		if msg == nil {
			return // a type this client does not know
		}
		again, err := json.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if fr2, err := DecodeFrame(again); err != nil || fr2.Type != fr.Type {
			t.Fatalf("%s encodes as %s, which decodes to %q, %v", data, again, fr2.Type, err)
		}
	})
}

// isNil reports whether m is a nil pointer of a message type.
func isNil(m any) bool {
	switch p := m.(type) {
	case *Hello:
		return p == nil
	case *Snapshot:
		return p == nil
	case *Tasks:
		return p == nil
	case *Metric:
		return p == nil
	case *AlertChange:
		return p == nil
	case *System:
		return p == nil
	case *Heartbeat:
		return p == nil
	case *AckResult:
		return p == nil
	case *StreamError:
		return p == nil
	}
	return m == nil
}
