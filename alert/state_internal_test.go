package alert

import (
	"bytes"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
)

// FuzzDecodeState: a state file never panics the decoder, and whatever it
// accepts encodes to a file that decodes to the same state.
func FuzzDecodeState(f *testing.F) {
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	good, _ := encodeState(State{
		Alerts: []StoredAlert{
			{Alert: apollo.Alert{ID: "a1", Rule: "r", Group: "g", State: apollo.AlertFiring, StartedAt: at, Labels: map[string]string{"k": "v"}}, FiringSent: true},
			{Alert: apollo.Alert{ID: "e1", Rule: "e", State: apollo.AlertFiring}, Event: true, Names: map[string]int64{"x": 3}},
		},
		Silences: []Silence{{ID: "s1", Rule: "r", StartsAt: at, EndsAt: at.Add(time.Hour), Comment: "c", CreatedBy: "a"}},
	})
	empty, _ := encodeState(State{})
	for _, s := range [][]byte{good, empty, []byte(`{"version":1}`), []byte(`{"version":1,"alerts":[{"id":"x","state":"resolved","value":1e308}]}`),
		[]byte(`{"version":1,"alerts":null,"silences":[{"id":"s","labels":{"":""}}]}`), []byte(`[]`), []byte(`{"version":1}{}`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeState(b)
		if err != nil {
			return
		}
		enc, err := encodeState(s)
		if err != nil {
			t.Fatalf("accepted state does not encode: %v", err)
		}
		s2, err := decodeState(enc)
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v\n%s", err, enc)
		}
		enc2, _ := encodeState(s2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzDecodeRules: the one rules file of the releases before never panics
// the decoder, and what it accepts is every tenant's text as it was saved.
func FuzzDecodeRules(f *testing.F) {
	for _, s := range []string{`{"version":1,"tenants":{"acme":"RULE a task_prefix: \"a_\" ON: failed","":""}}`,
		`{"version":1,"tenants":null}`, `{"version":1}`, `{"version":2}`, `[]`, `{"version":1,"tenants":{"a":1}}`, `{"version":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeRules(b)
		if err != nil {
			return
		}
		enc, err := json.Marshal(legacyRulesFile{Version: legacyRulesVersion, Tenants: m})
		if err != nil {
			t.Fatalf("accepted rules do not encode: %v", err)
		}
		m2, err := decodeRules(enc)
		if err != nil || !maps.Equal(m, m2) {
			t.Fatalf("re-encoded rules decode to %q, %v; want %q", m2, err, m)
		}
	})
}

// FuzzDecodeTenantRules: a tenant's rules file never panics the decoder,
// what it accepts encodes back to the same tenant and text, and the name
// of any tenant's file is one plain file name in the directory.
func FuzzDecodeTenantRules(f *testing.F) {
	for _, s := range []string{`{"version":2,"tenant":"acme","text":"RULE a task_prefix: \"a_\" ON: failed"}`,
		`{"version":2,"tenant":"","text":""}`, `{"version":2,"tenant":"../x","text":"<>"}`, `{"version":1}`, `{"version":2}{}`,
		`{"version":2,"tenant":1}`, `{"version":2,"extra":1}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeTenantRules(b)
		if err != nil {
			return
		}
		name := tenantFileName(r.Tenant)
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") || len(name) > 200 || strings.ContainsAny(name, "/\\\x00") {
			t.Fatalf("tenant %q: file name %q", r.Tenant, name)
		}
		enc, err := encodeTenantRules(r.Tenant, r.Text)
		if err != nil {
			t.Fatalf("accepted rules do not encode: %v", err)
		}
		r2, err := decodeTenantRules(enc)
		if err != nil || r2 != r {
			t.Fatalf("re-encoded rules decode to %+v, %v; want %+v", r2, err, r)
		}
	})
}

// FuzzDecodeMark: a live mark file never panics its decoder, is used
// only with the state file it names, and what it accepts encodes back to
// a mark that decodes the same.
func FuzzDecodeMark(f *testing.F) {
	state := []byte(`{"version":1,"alerts":null,"silences":null}`)
	good, _ := json.Marshal(markFile{Version: markVersion, State: stateHash(state), LiveMark: LiveMark{Watermark: 7, Heard: []uint64{9, 12}}})
	for _, s := range [][]byte{good, []byte(`{"version":1}`), []byte(`{"version":1,"state":"x","watermark":18446744073709551615}`),
		[]byte(`{"version":2,"state":"` + stateHash(state) + `"}`), []byte(`{"version":1,"state":"` + stateHash(state) + `","heard":[-1]}`), []byte(`null`)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := decodeMark(b, state)
		if m == nil {
			return
		}
		if decodeMark(b, append(state, ' ')) != nil {
			t.Fatal("a mark was used with a state file it does not name")
		}
		enc, err := json.Marshal(markFile{Version: markVersion, State: stateHash(state), LiveMark: *m})
		if err != nil {
			t.Fatal(err)
		}
		m2 := decodeMark(enc, state)
		if m2 == nil || m2.Watermark != m.Watermark || !slices.Equal(m2.Heard, m.Heard) {
			t.Fatalf("not stable: %+v then %+v", m, m2)
		}
	})
}
