package stream

import (
	"testing"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
)

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"type":"subscribe"}`,
		`{"type":"subscribe","filter":{"prefix":"etl","status":["failed","timeout"],"types":["tasks","alert"]},"cursor":"ab12.7","coalesce":false}`,
		`{"type":"ack","alert":"a-1"}`,
		`{"type":"heartbeat"}`,
		`{"type":"subscribe","filter":{"status":["done"]}}`,
		`{"type":"subscribe","filter":null,"coalesce":null}`,
		`{"type":"ack","alert":""}`,
		`[]`, `null`, `{"type":7}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := decodeRequest(data)
		if err != nil {
			var e *apollo.Error
			if apollo.ErrorCode(err) != apollo.EINVALID || !asError(err, &e) || e.Message == "" {
				t.Fatalf("error %v is not a user-facing invalid error", err)
			}
			return
		}
		switch r.typ {
		case apiclient.MsgSubscribe:
			if r.filter.types == 0 || r.filter.types&^wantAll != 0 {
				t.Fatalf("types bits %b", r.filter.types)
			}
			for _, s := range r.filter.statusList() {
				if !s.Valid() {
					t.Fatalf("status %v selected", s)
				}
			}
			if len(r.filter.prefix) > apollo.MaxNameBytes || len(r.cursor) > 64 {
				t.Fatal("over a limit")
			}
		case apiclient.MsgAck:
			if r.alert == "" {
				t.Fatal("ack without an alert")
			}
		case apiclient.MsgHeartbeat:
		default:
			t.Fatalf("type %q accepted", r.typ)
		}
	})
}

func asError(err error, e **apollo.Error) bool {
	x, ok := err.(*apollo.Error)
	*e = x
	return ok
}

func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(4)
	f := &streamFilter{types: wantAll}
	for i := uint64(1); i <= 6; i++ {
		r.add(&entry{cursor: i, tenant: "t", taskID: []string{"a", "b"}[i%2], task: &apollo.Task{}, json: []byte{'x'}})
	}
	tests := []struct {
		cursor uint64
		n      int
		ok     bool
	}{{1, 0, false}, {2, 2, true}, {5, 1, true}, {6, 0, true}, {7, 0, false}}
	for _, tt := range tests {
		out, ok := r.since(tt.cursor, "t", f)
		if ok != tt.ok || len(out) != tt.n {
			t.Errorf("since %d: %d entries, ok %v; want %d, %v", tt.cursor, len(out), ok, tt.n, tt.ok)
		}
	}
	if out, _ := r.since(2, "t", f); out[0].cursor != 5 || out[1].cursor != 6 {
		t.Errorf("latest per task: %d %d", out[0].cursor, out[1].cursor)
	}
	g := r.gap()
	if _, ok := r.since(6, "t", f); ok {
		t.Error("resumed across a gap")
	}
	if out, ok := r.since(g, "t", f); !ok || len(out) != 0 {
		t.Error("cannot resume from the gap itself")
	}
}
