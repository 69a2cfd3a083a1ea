package bus

import (
	"reflect"
	"testing"

	"github.com/apollo-11/apollo"
)

// DecodeRecord reads back exactly what the log holds, and refuses a
// payload with bytes after the record or a truncated one.
func TestDecodeRecord(t *testing.T) {
	r := apollo.Record{Event: apollo.Event{TaskID: "t1", Name: "job", Sequence: 2, Status: apollo.StatusRunning, Ts: 1700000000000,
		ScheduledAt: 1699999999000, TimeoutMs: 60000, Extra: []byte(`{"host":"w1"}`), Tenant: "acme"}, Kind: apollo.KindReport, ReceivedAt: 1700000000123}
	p := appendRecord(nil, &r)
	got, err := DecodeRecord(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, r)
	}
	if _, err := DecodeRecord(append(p, 0)); err == nil {
		t.Error("a trailing byte: no error")
	}
	if _, err := DecodeRecord(p[:len(p)-1]); err == nil {
		t.Error("a truncated record: no error")
	}
}
