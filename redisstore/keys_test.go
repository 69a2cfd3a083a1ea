package redisstore

import (
	"testing"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	k := keyspace{"apollo"}
	for _, tc := range []struct{ got, want string }{
		{k.window("", "batch_a"), "apollo:metric:{batch_a}:window"},
		{k.window("acme", "batch_a"), "apollo:acme:metric:{batch_a}:window"},
		{k.window("a:b{c}%", "x"), "apollo:a%3Ab%7Bc%7D%25:metric:{x}:window"},
		{k.names("acme"), "apollo:acme:metric:names"},
		{k.names(""), "apollo:metric:names"},
		{k.writers(), "apollo:metric:writers"},
	} {
		if tc.got != tc.want {
			t.Errorf("key %q, want %q", tc.got, tc.want)
		}
	}
	// No tenant's key can be another tenant's or a tenant-less one.
	seen := map[string]string{}
	for _, tn := range []string{"", "metric", "metric:{x", "a", "a:metric", "%3A", ":"} {
		for _, name := range []string{"x", "x}:window", "metric:{x", "names"} {
			key := k.window(tn, name)
			if prev, ok := seen[key]; ok {
				t.Errorf("tenant %q job %q and %s share the key %q", tn, name, prev, key)
			}
			seen[key] = tn + "/" + name
		}
		if prev, ok := seen[k.names(tn)]; ok {
			t.Errorf("the names of tenant %q share a key with %s", tn, prev)
		}
		seen[k.names(tn)] = "names of " + tn
	}
}

func TestFieldNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind   byte
		start  int64
		writer string
		want   string
	}{
		{kindBucket, 1893553800000, "", "b1893553800"},
		{kindRollup, 1893553200000, "bus-2", "m1893553200@bus-2"},
		{kindGauge, 0, "", "g"},
		{kindGauge, 0, "n1", "g@n1"},
	} {
		f := fieldName(tc.kind, tc.start, tc.writer)
		if f != tc.want {
			t.Errorf("fieldName = %q, want %q", f, tc.want)
		}
		kind, start, w, ok := parseField(f)
		if !ok || kind != tc.kind || start != tc.start || w != tc.writer {
			t.Errorf("parseField(%q) = %c %d %q %v", f, kind, start, w, ok)
		}
	}
	for _, f := range []string{"", "x1", "b", "b1@", "g1", "b+1", "b1.5", "m99999999999999999999", "b1893553440", "m1893553800"} {
		if _, _, _, ok := parseField(f); ok {
			t.Errorf("parseField(%q) accepted", f)
		}
	}
}

// A field either does not parse or parses to one that prints the same.
func FuzzParseField(f *testing.F) {
	for _, s := range []string{"b1893553800", "m3600@w", "g", "g@bus-1", "b-600", "b0600", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kind, start, w, ok := parseField(s)
		if !ok {
			return
		}
		again := fieldName(kind, start, w)
		k2, s2, w2, ok2 := parseField(again)
		if !ok2 || k2 != kind || s2 != start || w2 != w {
			t.Fatalf("%q -> %c %d %q -> %q -> %c %d %q %v", s, kind, start, w, again, k2, s2, w2, ok2)
		}
		if kind != kindGauge && blockOf(kind, start) != start {
			t.Fatalf("%q: start %d is not a block's", s, start)
		}
	})
}
