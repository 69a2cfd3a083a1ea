package agent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/apollo-11/apollo"
)

func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	events := []apollo.Event{
		{TaskID: "t", Sequence: 1, Status: apollo.StatusPending, Ts: 1764400000001},
		{TaskID: "backup-1", Name: "nightly", Sequence: 9, Status: apollo.StatusManualBlocked, Ts: 1_717_243_200_000,
			ScheduledAt: 1_717_243_100_000, TimeoutMs: 3_600_000, CostMs: 42, Extra: json.RawMessage(`{"exit":3,"host":"h1"}`)},
		{TaskID: "quote\" back\\ ctl\x01\n\t\r <>&", Name: "ünï\u2028", Sequence: 1, Status: apollo.StatusFailed, Ts: 1764400000001},
	}
	for _, ev := range events {
		got, err := appendEvent(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(&ev)
		if !sameJSON(t, got, want) {
			t.Errorf("appendEvent = %s\njson.Marshal = %s", got, want)
		}
	}
	spaced := apollo.Event{TaskID: "x", Sequence: 1, Status: apollo.StatusRunning, Ts: 1764400000001, Extra: json.RawMessage("{\n  \"a\": [1, 2]\n}")}
	got, err := appendEvent(nil, &spaced)
	if err != nil || bytes.ContainsAny(got, "\n ") {
		t.Errorf("extra not compacted: %s, %v", got, err)
	}
	spaced.Extra = json.RawMessage(`{"a":`)
	if _, err := appendEvent(nil, &spaced); apollo.ErrorCode(err) != apollo.EINVALID {
		t.Errorf("invalid extra: %v", err)
	}
}

// sameJSON reports whether a and b decode to the same event. Extra is
// compared by value: encoding/json escapes <, > and & in it, we do not.
func sameJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	decode := func(data []byte) (apollo.Event, any) {
		var e apollo.Event
		if err := json.Unmarshal(data, &e); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		var extra any
		if e.Extra != nil {
			if err := json.Unmarshal(e.Extra, &extra); err != nil {
				t.Fatalf("extra of %s: %v", data, err)
			}
		}
		e.Extra = nil
		return e, extra
	}
	ea, xa := decode(a)
	eb, xb := decode(b)
	return reflect.DeepEqual(ea, eb) && reflect.DeepEqual(xa, xb)
}

// FuzzAppendEvent checks the hand-written encoder against encoding/json:
// for any event that passes Validate, it writes one line of valid JSON that
// decodes to what encoding/json's output decodes to.
func FuzzAppendEvent(f *testing.F) {
	f.Add("t", "", int64(1), uint8(1), int64(1), int64(0), int64(0), int64(0), []byte(nil))
	f.Add("a\"b\\c\x00\x1f\u2028", "n\xffm", int64(1<<62), uint8(6), int64(1<<40), int64(5), int64(6), int64(7), []byte(`{"k":[1,"\n"]}`))
	f.Add("x", "y", int64(2), uint8(3), int64(3), int64(0), int64(0), int64(0), []byte("{ \"a\" :\t1 }"))
	f.Fuzz(func(t *testing.T, id, name string, seq int64, status uint8, ts, sched, timeout, cost int64, extra []byte) {
		ev := apollo.Event{TaskID: id, Name: name, Sequence: seq, Status: apollo.Status(status), Ts: ts,
			ScheduledAt: sched, TimeoutMs: timeout, CostMs: cost, Extra: extra}
		if ev.Validate() != nil {
			return
		}
		want, werr := json.Marshal(&ev)
		got, err := appendEvent(nil, &ev)
		if (err == nil) != (werr == nil) {
			t.Fatalf("appendEvent error %v, encoding/json error %v", err, werr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) || bytes.IndexByte(got, '\n') >= 0 {
			t.Fatalf("not one line of JSON: %q", got)
		}
		if !sameJSON(t, got, want) {
			t.Fatalf("appendEvent = %s\njson.Marshal = %s", got, want)
		}
	})
}

// BenchmarkEncodeEvent compares the hand-written encoder with
// encoding/json on a typical event.
func BenchmarkEncodeEvent(b *testing.B) {
	ev := apollo.Event{TaskID: "backup-2024-06-01", Name: "nightly_backup", Sequence: 2,
		Status: apollo.StatusSuccess, Ts: 1_717_243_200_000, CostMs: 2_520_000}
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendEvent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := appendEvent(make([]byte, 0, 96+len(ev.TaskID)+len(ev.Name)), &ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}
