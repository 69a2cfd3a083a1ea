package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"runtime"

	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// decodeEventsStdlib is the decoder that decodeEvents replaced, built on
// encoding/json, kept word for word as the reference of the differential
// tests: the two must agree except where decode.go documents why not.
func decodeEventsStdlib(body []byte, ndjson bool) (evs []apollo.Event, bad []*apollo.Error, err error) {
	var elems [][]byte
	var offsets []int64
	if ndjson {
		off := 0
		for line := range bytes.Lines(body) {
			if t := bytes.TrimSpace(line); len(t) > 0 {
				elems = append(elems, t)
				offsets = append(offsets, int64(off+bytes.Index(line, t)))
			}
			off += len(line)
		}
	} else {
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		lead := int64(len(body) - len(trimmed))
		if len(trimmed) > 0 && trimmed[0] == '[' {
			if !json.Valid(trimmed) {
				var v any
				return nil, nil, syntaxErrorStdlib(json.Unmarshal(trimmed, &v), lead)
			}
			dec := json.NewDecoder(bytes.NewReader(trimmed))
			if _, err := dec.Token(); err != nil { // the '['
				return nil, nil, syntaxErrorStdlib(err, lead)
			}
			for dec.More() {
				at := int(dec.InputOffset())
				for at < len(trimmed) && bytes.IndexByte([]byte(" \t\r\n,"), trimmed[at]) >= 0 {
					at++
				}
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return nil, nil, syntaxErrorStdlib(err, lead)
				}
				elems = append(elems, trimmed[at:at+len(raw)])
				offsets = append(offsets, lead+int64(at))
			}
		} else {
			if !json.Valid(trimmed) {
				var v any
				return nil, nil, syntaxErrorStdlib(json.Unmarshal(trimmed, &v), lead)
			}
			elems, offsets = [][]byte{trimmed}, []int64{lead}
		}
	}
	if len(elems) == 0 {
		return nil, nil, &apollo.Error{Code: apollo.EINVALID, Message: "the body holds no event", Hint: "send one event object, a JSON array of them, or NDJSON"}
	}
	evs = make([]apollo.Event, len(elems))
	bad = make([]*apollo.Error, len(elems))
	for i, el := range elems {
		bad[i] = decodeEventStdlib(el, offsets[i], &evs[i])
	}
	return evs, bad, nil
}

func decodeEventStdlib(el []byte, off int64, e *apollo.Event) *apollo.Error {
	if len(el) == 0 || el[0] != '{' {
		return &apollo.Error{Code: apollo.EINVALID, Offset: off, Message: "an event must be a JSON object"}
	}
	if err := json.Unmarshal(el, e); err != nil {
		var te *json.UnmarshalTypeError
		var ae *apollo.Error
		var se *json.SyntaxError
		switch {
		case errors.As(err, &ae):
			ae.Offset = off
			return ae
		case errors.As(err, &te):
			return &apollo.Error{Code: apollo.EINVALID, Field: te.Field, Offset: off + te.Offset,
				Message: fmt.Sprintf("a JSON %s where a %s belongs", te.Value, te.Type)}
		case errors.As(err, &se):
			return &apollo.Error{Code: apollo.EINVALID, Offset: off + max(se.Offset-1, 0), Message: "malformed JSON: " + se.Error()}
		default:
			return &apollo.Error{Code: apollo.EINVALID, Offset: off, Message: err.Error()}
		}
	}
	e.Tenant = "" // never from the body; the credentials set it
	if len(e.Extra) > 0 && e.Extra[0] != '{' && string(e.Extra) != "null" {
		return &apollo.Error{Code: apollo.EINVALID, Field: "extra", Offset: off, Message: "extra must be a JSON object"}
	}
	if string(e.Extra) == "null" {
		e.Extra = nil
	}
	return nil
}

func syntaxErrorStdlib(err error, base int64) *apollo.Error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at := base + max(se.Offset-1, 0) // encoding/json counts the bad byte as read
		return &apollo.Error{Code: apollo.EINVALID, Offset: at, Message: "malformed JSON: " + se.Error(),
			Hint: fmt.Sprintf("the problem is at byte %d of the body (counting from 0)", at)}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &apollo.Error{Code: apollo.EINVALID, Offset: base + te.Offset, Message: "the body must be an event object or an array of them"}
	}
	return &apollo.Error{Code: apollo.EINVALID, Message: "malformed JSON: " + err.Error()}
}

// reusedJunk fills the slices that checkAgainstStdlib decodes into again:
// every field set, and an element that fails.
const reusedJunk = `[{"taskID":"j1","name":"junk","sequence":7,"status":"failed","ts":1764400000000,"scheduledAt":1764400000000,` +
	`"timeoutMs":5,"costMs":6,"extra":{"a":1}},{"taskID":2},{"taskID":"j3","name":"other","sequence":1,"status":"running","ts":1764400000000}]`

// surrogateEscape finds a \u escape of a UTF-16 surrogate.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89abAB]`)

// checkAgainstStdlib decodes body with both decoders and fails where they
// disagree beyond the differences decode.go documents: the new one refuses
// invalid UTF-8 in taskID, name and extra, lone surrogate escapes in
// taskID and name, and nesting past maxDepth; field errors point at the
// value; messages are its own.
func checkAgainstStdlib(t *testing.T, body []byte, ndjson bool) {
	t.Helper()
	evs, bad, err := decodeEvents(body, ndjson, math.MaxInt)
	wevs, wbad, werr := decodeEventsStdlib(body, ndjson)
	// Decoded into the slices of another body's events, as ingest reuses
	// them, it gives the same (issue 20.2).
	junk, junkBad, _ := decodeEventsInto(nil, nil, []byte(reusedJunk), false, math.MaxInt)
	revs, rbad, rerr := decodeEventsInto(junk, junkBad, body, ndjson, math.MaxInt)
	if fmt.Sprint(rerr) != fmt.Sprint(err) || err == nil && (!reflect.DeepEqual(revs, evs) || !reflect.DeepEqual(rbad, bad)) {
		t.Fatalf("decoded into reused slices: %+v %+v %v; fresh: %+v %+v %v", revs, rbad, rerr, evs, bad, err)
	}
	if tooDeep(err) {
		if nesting(body, ndjson) <= maxDepth {
			t.Fatalf("refused as too deep, but it nests %d levels: %v", nesting(body, ndjson), err)
		}
		return
	}
	if (err == nil) != (werr == nil) {
		t.Fatalf("body refused: %v; by encoding/json: %v", err, werr)
	}
	if err != nil {
		e, we := err.(*apollo.Error), werr.(*apollo.Error)
		if e.Code != we.Code || e.Offset != we.Offset || e.Field != we.Field {
			t.Fatalf("body error %+v, encoding/json %+v", e, we)
		}
		return
	}
	if len(evs) != len(wevs) || len(bad) != len(evs) {
		t.Fatalf("%d events (%d results), encoding/json %d", len(evs), len(bad), len(wevs))
	}
	shift := ndjsonShifts(body, ndjson, len(evs))
	for i := range evs {
		e, we := bad[i], wbad[i]
		switch {
		case e != nil && e.Message == msgNotUTF8:
			if utf8.Valid(body) {
				t.Fatalf("event %d: %+v in a body of valid UTF-8", i, e)
			}
		case e != nil && e.Message == msgLoneSurrogate:
			if !surrogateEscape.Match(body) || e.Field != "taskID" && e.Field != "name" {
				t.Fatalf("event %d: %+v in a body without a surrogate escape", i, e)
			}
		case e != nil && tooDeep(e):
			if nesting(body, ndjson) <= maxDepth {
				t.Fatalf("event %d refused as too deep in a body that nests %d levels", i, nesting(body, ndjson))
			}
		case (e == nil) != (we == nil):
			t.Fatalf("event %d: error %+v, encoding/json %+v", i, e, we)
		case e != nil:
			if e.Code != we.Code || e.Field != we.Field || e.Message == "" {
				t.Fatalf("event %d: error %+v, encoding/json %+v", i, e, we)
			}
			if e.Field == "" && e.Offset != we.Offset+shift[i] { // not an object, or malformed
				t.Fatalf("event %d: offset %d, encoding/json %d (%+v)", i, e.Offset, we.Offset, e)
			}
			if e.Offset < 0 || e.Offset >= int64(len(body)) {
				t.Fatalf("event %d: offset %d outside the body", i, e.Offset)
			}
		default:
			if err := sameEvent(evs[i], wevs[i]); err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		}
	}
}

// ndjsonShifts says, per event, how far encoding/json's decoder misplaced
// the start of a line: it looked for the trimmed line with bytes.Index,
// which finds it inside a leading multibyte space when they share bytes
// ("\u00a0\xc2": NBSP is c2 a0). decodeEvents knows where the line starts.
func ndjsonShifts(body []byte, ndjson bool, n int) []int64 {
	shifts := make([]int64, n)
	if !ndjson {
		return shifts
	}
	i := 0
	for line := range bytes.Lines(body) {
		if t := bytes.TrimSpace(line); len(t) > 0 {
			shifts[i] = int64(cap(line) - cap(t) - bytes.Index(line, t))
			i++
		}
	}
	return shifts
}

func tooDeep(err error) bool {
	var e *apollo.Error
	return errors.As(err, &e) && strings.Contains(e.Message, fmt.Sprintf("nested more than %d levels", maxDepth))
}

// nesting counts how deeply brackets nest outside strings: NDJSON line by
// line. It need not parse: it only has to agree with a scanner that stopped
// at the first bracket too many, on the valid text before it.
func nesting(b []byte, ndjson bool) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case ndjson && c == '\n':
			depth, inString = 0, false
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			most = max(most, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return most
}

func sameEvent(got, want apollo.Event) error {
	if !bytes.Equal(got.Extra, want.Extra) || (got.Extra == nil) != (want.Extra == nil) {
		return fmt.Errorf("extra %q, encoding/json %q", got.Extra, want.Extra)
	}
	got.Extra, want.Extra = nil, nil
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%+v, encoding/json %+v", got, want)
	}
	return nil
}

const sampleEvent = `{"taskID":"t-1","name":"job","sequence":1,"status":"running","ts":1764400000000}`

// agreementCases are bodies on which the two decoders must agree; they seed
// FuzzDecodeMatchesStdlib too. Each names what it pins down.
var agreementCases = []struct {
	name   string
	body   string
	ndjson bool
}{
	{"one event", sampleEvent, false},
	{"every field", `{"taskID":"t","name":"n","sequence":3,"status":"success","ts":5,"scheduledAt":4,"timeoutMs":100,"costMs":7,"extra":{"a":[1,{"b":null}],"c":"d"}}`, false},
	{"array", "[" + sampleEvent + " , \n" + sampleEvent + "]", false},
	{"empty array", `[ ]`, false},
	{"empty body", ``, false},
	{"blank body", " \n\t", false},
	{"ndjson", sampleEvent + "\r\n\n  " + sampleEvent + "\n", true},
	{"ndjson blank", "\n \n", true},
	{"ndjson broken line", sampleEvent + "\n{\"taskID\":\n" + sampleEvent, true},
	{"ndjson trailing garbage", sampleEvent + " x\n", true},
	{"ndjson not objects", "[1]\n\"x\"\n{bad", true},
	{"ndjson unicode spaces", "\u00a0" + sampleEvent + "\u0085\n\v" + sampleEvent + "\f", true},
	{"ndjson space shares a byte with the line", "\u00a0\xc2", true},
	{"not objects", `[1,"x",null,true,[],{}]`, false},
	{"single not an object", ` "x" `, false},
	{"tenant ignored", `{"taskID":"t","tenant":"other","Tenant":"x","sequence":1,"status":"pending","ts":1}`, false},
	{"unknown fields skipped", `{"taskID":"t","zz":{"a":[1,2,{"b":"\u00e9\ud83d\ude00"}],"c":-1.5e+3},"sequence":1,"status":"pending","ts":1}`, false},
	{"keys fold case", `{"TASKID":"a","Name":"n","SEQUENCE":1,"Status":"pending","tS":1,"ScheduledAT":2,"TIMEOUTMS":3,"costms":4,"EXTRA":{}}`, false},
	{"keys fold kelvin and long s", `{"tasKID":"a","ſequence":1,"ſtatuſ":"pending","tſ":1}`, false},
	{"escaped key folds", `{"taskID":"a","\u017Fequence":1,"\u0053TATUS":"pending","t\u212A":1,"TS":1}`, false},
	{"escaped keys", `{"task\u0049D":"a","\u0073equence":1,"status":"pending","ts":1}`, false},
	{"last wins", `{"taskID":"a","taskID":"b","sequence":1,"sequence":2,"status":"pending","status":"running","ts":1,"extra":{"x":1},"extra":{"y":2}}`, false},
	{"null leaves fields", `{"taskID":"a","taskID":null,"name":null,"sequence":2,"sequence":null,"status":"running","status":null,"ts":1,"extra":{"x":1},"extra":null}`, false},
	{"extra not an object", `[{"taskID":"a","sequence":1,"status":"pending","ts":1,"extra":[1]},{"taskID":"a","sequence":1,"status":"pending","ts":1,"extra":"x"}]`, false},
	{"extra fixed by a later one", `{"taskID":"a","sequence":1,"status":"pending","ts":1,"extra":[1],"extra":{ "k" : 1 }}`, false},
	{"extra exact bytes", `{"taskID":"a","sequence":1,"status":"pending","ts":1,"extra":{ "k" : [ 1 , 2 ] , "s":"\"\u0041" }}`, false},
	{"wrong types", `[{"taskID":1},{"name":true},{"sequence":"1"},{"status":5},{"ts":{}},{"costMs":[1]},{"timeoutMs":1.5},{"scheduledAt":1e3},{"status":{}},{"taskID":[]}]`, false},
	{"first wrong type wins", `{"taskID":"a","sequence":"x","ts":"y","status":"pending"}`, false},
	{"wrong type is sticky", `{"taskID":"a","sequence":"x","sequence":1,"status":"pending","ts":1}`, false},
	{"unknown status outranks", `{"taskID":1,"sequence":"x","status":"done","ts":1}`, false},
	{"first unknown status", `{"status":"bogus","status":"other","taskID":"a"}`, false},
	{"status escapes", `{"taskID":"a","sequence":1,"status":"runn\u0069ng","ts":1}`, false},
	{"empty status", `{"taskID":"a","sequence":1,"status":"","ts":1}`, false},
	{"integers at the edges", `[{"sequence":9223372036854775807,"ts":-9223372036854775808,"costMs":-0,"timeoutMs":0},{"sequence":9223372036854775808},{"ts":-9223372036854775809},{"ts":10000000000000000000000},{"ts":1.0},{"ts":1E2},{"ts":-0.0}]`, false},
	{"string escapes", `{"taskID":"a\"\\\/\b\f\n\r\t\u0000\u00e9\u20ac\ud83d\ude00","name":"\ud800","sequence":1,"status":"pending","ts":1}`, false},
	{"lone surrogates", `{"taskID":"\udc00x\ud800\u0041\ud800\ud800","sequence":1,"status":"pending","ts":1}`, false},
	{"multibyte strings", `{"taskID":"задача-1","name":"作业","sequence":1,"status":"pending","ts":1,"extra":{"ключ":"значение"}}`, false},
	{"malformed trailing comma", `[{"taskID":"a",}]`, false},
	{"malformed array comma", `[1,]`, false},
	{"malformed leading comma", `[,1]`, false},
	{"malformed missing colon", `{"a" 1}`, false},
	{"malformed truncated", `[{"taskID":"a"`, false},
	{"malformed truncated string", `{"taskID":"a`, false},
	{"malformed trailing data", sampleEvent + ` {}`, false},
	{"malformed bad escape", `{"taskID":"\x"}`, false},
	{"malformed bad unicode escape", `{"taskID":"\u12g4"}`, false},
	{"malformed control character", "{\"taskID\":\"a\tb\"}", false},
	{"malformed number", `[01]`, false},
	{"malformed minus", `[-]`, false},
	{"malformed fraction", `[1.]`, false},
	{"malformed exponent", `[1e+]`, false},
	{"malformed literal", `[tru]`, false},
	{"malformed literal end", `[nul`, false},
	{"malformed byte order mark", "\ufeff" + sampleEvent, false},
	{"malformed key", `{1:2}`, false},
	{"malformed close", `[{]`, false},
	{"deep but allowed", `{"taskID":"a","sequence":1,"status":"pending","ts":1,"extra":{"x":` + strings.Repeat("[", 60) + strings.Repeat("]", 60) + `}}`, false},
	{"utf8 in unknown field", "{\"taskID\":\"a\",\"zz\":\"\xff\",\"sequence\":1,\"status\":\"pending\",\"ts\":1}", false},
	{"utf8 in status", "{\"taskID\":\"a\",\"sequence\":1,\"status\":\"pend\xffing\",\"ts\":1}", false},
}

func TestDecodeMatchesStdlib(t *testing.T) {
	t.Parallel()
	for _, tc := range agreementCases {
		t.Run(tc.name, func(t *testing.T) {
			checkAgainstStdlib(t, []byte(tc.body), tc.ndjson)
		})
	}
}

func FuzzDecodeMatchesStdlib(f *testing.F) {
	for _, tc := range agreementCases {
		f.Add([]byte(tc.body), tc.ndjson)
	}
	f.Add([]byte("{\"taskID\":\"\xff\",\"sequence\":1,\"status\":\"pending\",\"ts\":1}"), false)
	f.Add([]byte(`{"extra":{"x":`+strings.Repeat("[", 70)+strings.Repeat("]", 70)+`}}`), true)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		checkAgainstStdlib(t, body, ndjson)
	})
}

// TestDecodeEvents pins down, without the reference, what decode.go chose:
// where errors point, and what it refuses that encoding/json let through.
func TestDecodeEvents(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return `{"extra":{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}` }
	tests := []struct {
		name   string
		body   string
		ndjson bool
		errAt  int64    // the body is refused with this offset; -1: it is not
		fields []string // per event: "" good, "!" bad without a field, else the bad field
		ats    []int64  // per bad event: its offset
	}{
		{"good", sampleEvent, false, -1, []string{""}, nil},
		{"wrong type points at the value", `[{"taskID":"a","sequence":"1"}]`, false, -1, []string{"sequence"}, []int64{26}},
		{"unknown status points at the value", `{"status":"done"}`, false, -1, []string{"status"}, []int64{10}},
		{"fraction", `{"ts": 1.5}`, false, -1, []string{"ts"}, []int64{7}},
		{"taskID not UTF-8", "{\"taskID\":\"a\xffb\"}", false, -1, []string{"taskID"}, []int64{10}},
		{"name not UTF-8", "{\"name\":\"\xc3\"}", false, -1, []string{"name"}, []int64{8}},
		{"surrogate encoded as UTF-8", "{\"name\":\"\xed\xa0\x80\"}", false, -1, []string{"name"}, []int64{8}},
		{"extra not UTF-8", "{\"extra\":{\"k\":\"\xff\"}}", false, -1, []string{"extra"}, []int64{9}},
		{"escaped pair", `{"taskID":"\ud83d\ude00","name":"\u00e9"}`, false, -1, []string{""}, nil},
		{"lone high surrogate", `{"taskID":"x\ud800"}`, false, -1, []string{"taskID"}, []int64{10}},
		{"lone low surrogate", `{"taskID":"x","name":"\udc00y"}`, false, -1, []string{"name"}, []int64{21}},
		{"high surrogate then a letter", `{"name":"\ud83dA"}`, false, -1, []string{"name"}, []int64{8}},
		{"surrogate escape in extra is kept", `{"extra":{"k":"\ud800"}}`, false, -1, []string{""}, nil},
		// In a batch the extra object is 3 levels deep, its value's brackets start at byte 15.
		{"deepest allowed", "[" + deep(maxDepth-3) + "]", false, -1, []string{""}, nil},
		{"one level too deep", "[" + deep(maxDepth-2) + "]", false, 15 + maxDepth - 3, nil, nil},
		{"too deep in ndjson fails the line", sampleEvent + "\n" + deep(maxDepth-1) + "\n" + sampleEvent, true, -1, []string{"", "!", ""}, []int64{int64(len(sampleEvent)) + 1 + 14 + maxDepth - 2}},
		{"malformed", `[{"taskID":"a",}]`, false, 15, nil, nil},
		{"ends early", `[{"taskID":"a"`, false, 13, nil, nil},
		{"blank", "  ", false, 2, nil, nil},
		{"no event", `[]`, false, 0, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs, bad, err := decodeEvents([]byte(tt.body), tt.ndjson, math.MaxInt)
			if tt.errAt >= 0 {
				var e *apollo.Error
				if !errors.As(err, &e) || e.Offset != tt.errAt || e.Code != apollo.EINVALID {
					t.Fatalf("error %#v, want one at %d", err, tt.errAt)
				}
				return
			}
			if err != nil || len(evs) != len(tt.fields) || len(bad) != len(evs) {
				t.Fatalf("%d events, %d results, error %v; want %d events", len(evs), len(bad), err, len(tt.fields))
			}
			ats := tt.ats
			for i, want := range tt.fields {
				switch e := bad[i]; {
				case want == "" && e != nil:
					t.Errorf("event %d: %+v", i, e)
				case want == "":
				case e == nil || e.Field != strings.TrimPrefix(want, "!") || e.Offset != ats[0] || e.Message == "":
					t.Errorf("event %d: %+v, want field %q at %d", i, e, want, ats[0])
				default:
					ats = ats[1:]
				}
			}
		})
	}
}

// TestDecodeErrorsQuoteLittle keeps a megabyte value from being echoed
// back in its own error message.
func TestDecodeErrorsQuoteLittle(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("7", 1<<20)
	for _, body := range []string{`{"ts":` + long + `}`, `{"ts":1.` + long + `}`, `{"status":"` + long + `"}`} {
		_, bad, err := decodeEvents([]byte(body), false, math.MaxInt)
		if err != nil || bad[0] == nil || len(bad[0].Error()) > 200 {
			t.Fatalf("error %v, bad %.300v", err, bad[0])
		}
	}
}

// TestDecodeCopiesWhatItKeeps proves that events do not alias the body,
// which the server reuses or frees after the request.
func TestDecodeCopiesWhatItKeeps(t *testing.T) {
	t.Parallel()
	body := []byte(`[{"taskID":"t\u00e9","name":"job","sequence":1,"status":"pending","ts":1,"extra":{"k":"v"}},{"taskID":"u","name":"job","sequence":1,"status":"pending","ts":1},{"taskID":"v","name":"other","sequence":1,"status":"pending","ts":1}]`)
	evs, bad, err := decodeEvents(body, false, math.MaxInt)
	if err != nil || bad[0] != nil || bad[1] != nil || bad[2] != nil {
		t.Fatal(err, bad)
	}
	for i := range body {
		body[i] = 'X'
	}
	if evs[0].TaskID != "té" || evs[0].Name != "job" || string(evs[0].Extra) != `{"k":"v"}` ||
		evs[1].Name != "job" || evs[2].Name != "other" {
		t.Fatalf("events changed with the body: %+v", evs)
	}
}

// benchBody is a batch like BenchmarkIngest's: n events of about 170 bytes.
func benchBody(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"taskID":"bench-%d","name":"bench_job","sequence":1,"status":"running","ts":1764400000000,"scheduledAt":1764400000000,"extra":{"host":"worker-1","attempt":1}}`, i)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// TestDecodeAllocs holds the decoder to what the events keep: a taskID and
// an extra per event, one name per batch, the two result slices.
func TestDecodeAllocs(t *testing.T) {
	const n = 100
	body := benchBody(n)
	allocs := testing.AllocsPerRun(20, func() {
		if _, _, err := decodeEvents(body, false, math.MaxInt); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2*n+4 {
		t.Fatalf("%v allocations for %d events, want at most %d", allocs, n, 2*n+4)
	}
}

func BenchmarkDecode(b *testing.B) {
	const n = 100
	body := benchBody(n)
	for _, impl := range []struct {
		name   string
		decode func([]byte, bool) ([]apollo.Event, []*apollo.Error, error)
	}{{"stdlib", decodeEventsStdlib}, {"fast", func(body []byte, ndjson bool) ([]apollo.Event, []*apollo.Error, error) {
		return decodeEvents(body, ndjson, maxEventsPerRequest)
	}}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if _, _, err := impl.decode(body, false); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			events := float64(b.N * n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/events, "allocs/event")
		})
	}
}

// answerCases are answers whose encoding must match encoding/json's.
var answerCases = []struct {
	name string
	ans  ingestAnswer
}{
	{"nil results", ingestAnswer{}},
	{"no results", ingestAnswer{Results: []eventResult{}}},
	{"mixed", ingestAnswer{Results: []eventResult{
		{Result: "accepted"},
		{Result: "rejected", Error: &apollo.Error{Code: apollo.EINVALID, Field: "sequence", Message: "0 is below 1", Hint: "number them", Offset: 12}},
		{Result: "rejected", Error: &apollo.Error{Code: apollo.EINVALID, Message: `unknown status "d\\o"`, Offset: -3}},
		{Result: "retry_later", Error: &apollo.Error{Code: apollo.EUNAVAILABLE}},
	}, Accepted: 1, Rejected: 2, RetryLater: 1, Held: 1 << 40, Waiting: 3, SlowDown: true}},
	{"hard strings", ingestAnswer{Results: []eventResult{{Result: "x", Error: &apollo.Error{
		Code:    "\x00\x01\b\f\n\r\t\x1f\x7f",
		Field:   "<a & b>",
		Message: "\u2028\u2029\ufffd\xff\xc3\xed\xa0\x80é€😀",
		Hint:    `"\/`,
	}}}, Duplicate: -1}},
}

func stdlibAnswer(a ingestAnswer) []byte {
	rec := httptest.NewRecorder()
	writeJSON(rec, 200, a)
	return rec.Body.Bytes()
}

func TestAnswerMatchesStdlib(t *testing.T) {
	t.Parallel()
	for _, tc := range answerCases {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := tc.ans.appendJSON(nil), stdlibAnswer(tc.ans); !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
		})
	}
}

func FuzzAnswerMatchesStdlib(f *testing.F) {
	f.Add("accepted", "invalid", "ts", "missing", "send it", int64(3), 1, true)
	f.Add("x\u2028", "\x00", "\xff", `"\`, "<>&", int64(0), 0, false)
	f.Fuzz(func(t *testing.T, result, code, field, msg, hint string, offset int64, n int, slow bool) {
		a := ingestAnswer{Results: []eventResult{{Result: result}, {Result: result, Error: &apollo.Error{Code: code, Field: field, Message: msg, Hint: hint, Offset: offset}}},
			Accepted: n, Duplicate: -n, Rejected: n / 3, RetryLater: n % 7, Held: n >> 3, Waiting: n % 5, SlowDown: slow}
		if got, want := a.appendJSON(nil), stdlibAnswer(a); !bytes.Equal(got, want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

// TestAnswerEncoderKnowsEveryField fails when a field is added to the
// answer or to apollo.Error: appendJSON writes each one by hand.
func TestAnswerEncoderKnowsEveryField(t *testing.T) {
	t.Parallel()
	for typ, want := range map[reflect.Type]string{
		reflect.TypeFor[ingestAnswer](): "results accepted duplicate rejected retryLater held waiting slowDown,omitempty",
		reflect.TypeFor[eventResult]():  "result error,omitempty",
		reflect.TypeFor[apollo.Error](): "code field,omitempty message hint,omitempty offset,omitempty",
	} {
		var tags []string
		for f := range typ.Fields() {
			tags = append(tags, f.Tag.Get("json"))
		}
		if got := strings.Join(tags, " "); got != want {
			t.Errorf("%v has JSON fields %q; appendJSON writes %q: teach it the change", typ, got, want)
		}
	}
}

// discardResponse is a ResponseWriter that keeps nothing, so that the
// answer benchmark measures the encoding alone.
type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header       { return d.h }
func (discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (discardResponse) WriteHeader(int)             {}

// BenchmarkAnswer compares the answer to a batch of 100 with one rejected
// event, written by encoding/json and appended by hand as postEvents does.
func BenchmarkAnswer(b *testing.B) {
	a := ingestAnswer{Results: make([]eventResult, 100), Accepted: 99, Rejected: 1}
	for i := range a.Results {
		a.Results[i].Result = bus.Accepted.String()
	}
	a.Results[7] = eventResult{Result: bus.Rejected.String(), Error: &apollo.Error{Code: apollo.EINVALID, Field: "sequence", Message: "0 is below 1", Hint: "number each task's events 1, 2, 3, ..."}}
	w := discardResponse{http.Header{}}
	b.Run("stdlib", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeJSON(w, 200, a)
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			w.Write(a.appendJSON(make([]byte, 0, 128+32*len(a.Results))))
		}
	})
}

// decodeEvents stops at the element that passes its limit, in a batch and
// in NDJSON (where blank lines are no elements), and takes no more than the
// limit's worth of allocations (not parallel: AllocsPerRun).
func TestDecodeStopsAtTheLimit(t *testing.T) {
	batch := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat(sampleEvent+",", n), ",") + "]" }
	lines := func(n int) string { return strings.Repeat(sampleEvent+"\n\n", n) }
	for _, tt := range []struct {
		name   string
		body   string
		ndjson bool
		max    int
		over   bool
	}{
		{"batch at the limit", batch(3), false, 3, false},
		{"batch one over", batch(4), false, 3, true},
		{"one object, limit 1", sampleEvent, false, 1, false},
		{"ndjson at the limit", lines(3), true, 3, false},
		{"ndjson one over", lines(4), true, 3, true},
		{"not objects count", "[1,2,3,4]", false, 3, true},
		{"over before a syntax error", "[1,2,3,4,", false, 3, true},
	} {
		evs, bad, err := decodeEvents([]byte(tt.body), tt.ndjson, tt.max)
		switch {
		case tt.over && !errors.Is(err, errTooManyEvents):
			t.Errorf("%s: %d events, error %v; want errTooManyEvents", tt.name, len(evs), err)
		case !tt.over && (err != nil || len(evs) != tt.max || len(bad) != tt.max):
			t.Errorf("%s: %d events, %d results, error %v; want %d", tt.name, len(evs), len(bad), err, tt.max)
		}
	}
	body := []byte("[" + strings.Repeat("1,", 1<<20) + "1]")
	n := testing.AllocsPerRun(5, func() { decodeEvents(body, false, 1000) })
	if n > 1000+20 {
		t.Errorf("%v allocations to refuse a million elements at 1 000", n)
	}
}

// A run's events side by side in one batch share one copy of their task
// ID (escaped or not), and every event still carries its own ID.
func TestDecodeKeepsOneCopyOfARunsTaskID(t *testing.T) {
	body := `[{"taskID":"r1","sequence":1,"status":"pending","ts":1},{"taskID":"r\u0031","sequence":2,"status":"running","ts":2},` +
		`{"taskID":"r2","sequence":1,"status":"pending","ts":3},{"taskID":"r1","sequence":3,"status":"success","ts":4}]`
	evs, bad, err := decodeEvents([]byte(body), false, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, e := range evs {
		if bad[i] != nil {
			t.Fatalf("event %d refused: %v", i, bad[i])
		}
		ids = append(ids, e.TaskID)
	}
	if want := []string{"r1", "r1", "r2", "r1"}; !slices.Equal(ids, want) {
		t.Fatalf("task IDs %q, want %q", ids, want)
	}
	if unsafe.StringData(ids[0]) != unsafe.StringData(ids[1]) {
		t.Error("the run's two events side by side hold two copies of its task ID")
	}
}
