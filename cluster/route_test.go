package cluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strconv"
	"testing"
)

// The partition function is a protocol: agents compute it. These values
// were computed from the definition (FNV-1a 32-bit, mod n) and must never
// change.
func TestPartitionIsStable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		id   string
		n    int
		want int
	}{
		{"", 16, int(uint32(2166136261) % 16)},
		{"a", 1024, int(uint32(0xe40c292c) % 1024)},
		{"foobar", 16, int(uint32(0xbf9cf968) % 16)},
		{"foobar", 7, int(uint32(0xbf9cf968) % 7)},
	} {
		if got := Partition(c.id, c.n); got != c.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}

func TestPartitionSpreads(t *testing.T) {
	t.Parallel()
	const n, ids = 16, 16000
	var count [n]int
	for i := range ids {
		count[Partition("batch_report-"+strconv.Itoa(i), n)]++
	}
	for p, c := range count {
		if c < ids/n*8/10 || c > ids/n*12/10 {
			t.Errorf("partition %d has %d of %d task IDs, more than 20%% off an even share", p, c, ids)
		}
	}
}

func TestTenantToken(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ tenant, token string }{
		{"", "_"},
		{"acme", "acme"},
		{"team-7", "team-7"},
		{"_", "%5F"},
		{"a.b", "a%2Eb"},
		{"a b*>", "a%20b%2A%3E"},
		{"ü", "%C3%BC"},
	} {
		if got := TenantToken(c.tenant); got != c.token {
			t.Errorf("TenantToken(%q) = %q, want %q", c.tenant, got, c.token)
		}
		back, err := ParseTenantToken(c.token)
		if err != nil || back != c.tenant {
			t.Errorf("ParseTenantToken(%q) = %q, %v; want %q", c.token, back, err, c.tenant)
		}
	}
	for _, bad := range []string{"", "a.b", "%2", "%zz", "%41", "%2e", "a_b"} {
		if _, err := ParseTenantToken(bad); err == nil {
			t.Errorf("ParseTenantToken(%q) took a token TenantToken never writes", bad)
		}
	}
}

func TestEventSubject(t *testing.T) {
	t.Parallel()
	if got := EventSubject("", 3); got != "apollo.events._.3" {
		t.Errorf("EventSubject = %q", got)
	}
	tenant, p, err := parseEventSubject(EventSubject("a.b", 12))
	if err != nil || tenant != "a.b" || p != 12 {
		t.Errorf("parse(EventSubject(a.b, 12)) = %q, %d, %v", tenant, p, err)
	}
	for _, bad := range []string{"apollo.events._", "apollo.events._.x", "apollo.events._.-1", "apollo.events._.01", "apollo.log.1", "apollo.events..1"} {
		if _, _, err := parseEventSubject(bad); err == nil {
			t.Errorf("parseEventSubject(%q) took it", bad)
		}
	}
	if got := MsgID("", "job-1", 3); got != "_/job-1:3" {
		t.Errorf("MsgID = %q", got)
	}
	// The default tenant's task named like another tenant's, after a
	// slash, has an ID of its own.
	if a, b := MsgID("", "acme/job-1", 3), MsgID("acme", "job-1", 3); a == b {
		t.Errorf("MsgID of the default tenant's acme/job-1 = acme's job-1 = %q", a)
	}
	if got := MsgID("acme", "job-1", 3); got != "acme/job-1:3" {
		t.Errorf("MsgID = %q", got)
	}
}

func FuzzParseTenantToken(f *testing.F) {
	for _, s := range []string{"_", "acme", "%5F", "a%2Eb", "%C3%BC", "%", "%4", "a_b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		tenant, err := ParseTenantToken(tok)
		if err != nil {
			return
		}
		if again := TenantToken(tenant); again != tok {
			t.Fatalf("ParseTenantToken(%q) = %q, whose token is %q: two tokens for one tenant", tok, tenant, again)
		}
	})
}

func FuzzParseEventSubject(f *testing.F) {
	for _, s := range []string{"apollo.events._.0", "apollo.events.acme.15", "apollo.events.a%2Eb.3", "apollo.events._.x", "apollo.events", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subj string) {
		tenant, p, err := parseEventSubject(subj)
		if err != nil {
			return
		}
		if again := EventSubject(tenant, p); again != subj {
			t.Fatalf("parseEventSubject(%q) = %q, %d, whose subject is %q", subj, tenant, p, again)
		}
	})
}

func FuzzSplitBatch(f *testing.F) {
	var batch []byte
	for _, r := range [][]byte{[]byte("one"), {}, bytes.Repeat([]byte{7}, 300)} {
		batch = binary.AppendUvarint(batch, uint64(len(r)))
		batch = append(batch, r...)
	}
	f.Add(batch)
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Add([]byte{5, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs [][]byte
		err := splitBatch(data, func(rec []byte) error {
			recs = append(recs, rec)
			return nil
		})
		if err != nil {
			return
		}
		var again []byte
		for _, r := range recs {
			again = binary.AppendUvarint(again, uint64(len(r)))
			again = append(again, r...)
		}
		if !bytes.Equal(again, data) && !nonMinimalVarints(data) {
			t.Fatalf("split and joined again, %x became %x", data, again)
		}
	})
}

// nonMinimalVarints reports whether data's lengths may be written with
// more bytes than needed (0x80 0x00 is 0): split accepts them, join writes
// the short form.
func nonMinimalVarints(data []byte) bool {
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 {
			return false
		}
		if k != len(binary.AppendUvarint(nil, n)) {
			return true
		}
		data = data[k+int(n):]
	}
	return false
}

func TestSplitBatchStopsOnError(t *testing.T) {
	t.Parallel()
	data := append(binary.AppendUvarint(nil, 1), 'x')
	data = append(data, data...)
	stop := errors.New("stop")
	calls := 0
	err := splitBatch(data, func([]byte) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("splitBatch = %v after %d calls, want the callback's error after 1", err, calls)
	}
}
