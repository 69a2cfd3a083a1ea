package apiclient

import (
	"encoding/json"
	"reflect"
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
				if f.Type != MsgHello || f.Msg.(*Hello).Cursor != "c.1" || f.Msg.(*Hello).HeartbeatMs != 15000 || f.Msg.(*Hello).Principal.Name != "oscar" || f.Msg.(*Hello).Principal.Role != "operator" {
					t.Errorf("%+v", f.Msg.(*Hello))
				}
			}},
		{name: "snapshot", in: `{"type":"snapshot","cursor":"c.7","reason":"subscribe","tasks":[{"taskID":"a","status":"running"},{"taskID":"b","status":"failed","costMs":55000}]}`,
			check: func(t *testing.T, f Frame) {
				s := f.Msg.(*Snapshot)
				if len(s.Tasks) != 2 || s.Tasks[1].Status != apollo.StatusFailed || s.Tasks[1].CostMs != 55_000 || s.Reason != "subscribe" || s.Cursor != "c.7" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "resumed tasks", in: `{"type":"tasks","cursor":"x.3","resumed":true,"tasks":[]}`, check: func(t *testing.T, f Frame) {
			if !f.Msg.(*Tasks).Resumed || f.Msg.(*Tasks).Cursor != "x.3" {
				t.Errorf("%+v", f.Msg.(*Tasks))
			}
		}},
		{name: "alert", in: `{"type":"alert","alert":{"id":"a-1","rule":"r","state":"firing","firedAt":"2026-11-29T10:00:00Z"}}`, check: func(t *testing.T, f Frame) {
			if a := f.Msg.(*AlertChange).Alert; a.ID != "a-1" || a.State != apollo.AlertFiring || a.FiredAt.IsZero() {
				t.Errorf("%+v", a)
			}
		}},
		{name: "ack_result", in: `{"type":"ack_result","alert":"a-1","ok":false,"error":"no"}`, check: func(t *testing.T, f Frame) {
			if r := f.Msg.(*AckResult); r.Alert != "a-1" || r.OK || r.Error != "no" {
				t.Errorf("%+v", r)
			}
		}},
		{name: "system", in: `{"type":"system","stats":{"bus":{"accepted":3}}}`, check: func(t *testing.T, f Frame) {
			if !strings.Contains(string(f.Msg.(*System).Stats), `"accepted":3`) {
				t.Errorf("%s", f.Msg.(*System).Stats)
			}
		}},
		{name: "metric", in: `{"type":"metric","prefix":"etl","summaries":{"jobs":[]}}`, check: func(t *testing.T, f Frame) {
			if f.Msg.(*Metric).Prefix != "etl" || string(f.Msg.(*Metric).Summaries) != `{"jobs":[]}` {
				t.Errorf("%+v", f.Msg.(*Metric))
			}
		}},
		{name: "heartbeat", in: `{"type":"heartbeat","ts":5,"cursor":"c.9"}`, check: func(t *testing.T, f Frame) {
			if f.Msg.(*Heartbeat).Ts != 5 || f.Msg.(*Heartbeat).Cursor != "c.9" {
				t.Errorf("%+v", f.Msg.(*Heartbeat))
			}
		}},
		{name: "error", in: `{"type":"error","message":"unknown type","code":"invalid","field":"type","hint":"use subscribe"}`, check: func(t *testing.T, f Frame) {
			if f.Msg.(*StreamError).Message != "unknown type" || f.Msg.(*StreamError).Hint != "use subscribe" || f.Msg.(*StreamError).Field != "type" {
				t.Errorf("%+v", f.Msg.(*StreamError))
			}
		}},
		{name: "type not first", in: ` {"cursor":"c","type":"heartbeat","ts":1}`, check: func(t *testing.T, f Frame) {
			if hb, ok := f.Msg.(*Heartbeat); !ok || hb.Ts != 1 {
				t.Errorf("%+v", f)
			}
		}},
		{name: "unknown type passes", in: `{"type":"future","x":1}`, check: func(t *testing.T, f Frame) {
			if f.Type != "future" || f.Msg != nil {
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
// panic; a frame that decodes has a type and the message of that type,
// tasks with IDs and an alert with one; and the message, encoded again,
// decodes to the same type.
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
		mk, known := newMessage[fr.Type]
		switch {
		case !known && fr.Msg != nil:
			t.Fatalf("type %q, unknown, decoded as %T", fr.Type, fr.Msg)
		case !known:
			return
		case reflect.TypeOf(fr.Msg) != reflect.TypeOf(mk()):
			t.Fatalf("type %q decoded as %T", fr.Type, fr.Msg)
		}
		var tasks []apollo.Task
		switch m := fr.Msg.(type) {
		case *Tasks:
			tasks = m.Tasks
		case *Snapshot:
			tasks = m.Tasks
		case *AlertChange:
			if m.Alert == nil || m.Alert.ID == "" {
				t.Fatal("an alert without an ID decoded")
			}
		}
		for _, task := range tasks {
			if task.TaskID == "" {
				t.Fatal("a task without an ID decoded")
			}
		}
		again, err := json.Marshal(fr.Msg)
		if err != nil {
			t.Fatal(err)
		}
		if fr2, err := DecodeFrame(again); err != nil || reflect.TypeOf(fr2.Msg) != reflect.TypeOf(fr.Msg) {
			t.Fatalf("%s encodes as %s, which decodes to %T, %v", data, again, fr2.Msg, err)
		}
	})
}
