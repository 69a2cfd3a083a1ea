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

// The write-ahead log fills ahead of its records with 0xFF bytes and, after
// a crash, finds where its records end by the last byte that is not 0xFF
// (wal.fillByte): a record's encoding must never end with one. It ends with
// Extra, which the API accepts only as a JSON object ('}'), or with the
// varint of an empty Extra's length (0).
func TestRecordNeverEndsWithTheLogsFill(t *testing.T) {
	for _, extra := range []string{"", "{}", `{"k":"ÿ"}`, `{"n":[1,2,{"deep":true}]}`} {
		r := apollo.Record{Event: apollo.Event{TaskID: "t\xff", Name: "job\xff", Sequence: 1<<63 - 1, Status: apollo.StatusRunning,
			Ts: -1, Extra: []byte(extra)}, Kind: apollo.KindReport, ReceivedAt: -1, Reason: "\xff"}
		if p := appendRecord(nil, &r); p[len(p)-1] == 0xFF {
			t.Errorf("a record with extra %q ends with 0xFF: % x", extra, p[len(p)-8:])
		}
	}
}
