package httpapi

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/apollo-11/apollo"
)

// The ingest decoder is a hand-written single-pass scanner: it checks the
// JSON syntax and fills apollo.Event in the same pass, without reflection,
// and allocates only what the events keep (taskID, name, a copy of extra).
// It decodes what encoding/json.Unmarshal would into an apollo.Event:
//
//   - field names match exactly or, failing that, case-insensitively
//     (bytes.EqualFold, as encoding/json does); unknown fields, and tenant,
//     are checked and skipped; with a repeated name the last value wins;
//   - null leaves a field as it was; integers must be JSON integers within
//     int64 (no fraction, no exponent); extra is kept as its exact bytes
//     and must be an object or null;
//   - the first unknown status in an event is its error; otherwise the
//     first value of a wrong type; otherwise an extra that is not an object.
//
// Where it is stricter than encoding/json, on purpose:
//
//   - every taskID and name value, and extra, must be valid UTF-8 ("not
//     valid UTF-8" on that field, ranked as a wrong type). encoding/json
//     replaced bad bytes in strings with U+FFFD, so two different raw IDs
//     could become one task; and it kept extra with the bad bytes in it,
//     for every reader to trip on later.
//   - for the same reason a taskID or name must not hold a \u escape of
//     half a surrogate pair (msgLoneSurrogate, ranked the same):
//     encoding/json made U+FFFD of it, so "\ud800" and "\udc00" were one
//     task.
//   - values nest at most maxDepth brackets deep, counting every bracket
//     around them (encoding/json: 10000). A deeper body is refused like a
//     malformed one; in NDJSON, only that line is.
//
// Offsets: syntax errors and "not an object" point where encoding/json
// pointed (the first bad byte; the last byte when the input ends early). A
// field error points at the first byte of the field's value, where
// encoding/json pointed at the event (status, extra) or just past the value
// (wrong types). Messages are our own.

const (
	msgNotUTF8       = "not valid UTF-8"
	msgLoneSurrogate = "holds a \\u escape of half a UTF-16 surrogate pair, which is no character"
)

// Fields of an event, in the order of their names in fieldNames.
const (
	fUnknown = iota
	fTaskID
	fName
	fSequence
	fStatus
	fTs
	fScheduledAt
	fTimeoutMs
	fCostMs
	fExtra
	numFields
)

var fieldNames = [numFields]string{"", "taskID", "name", "sequence", "status", "ts", "scheduledAt", "timeoutMs", "costMs", "extra"}

// wireStatuses is computed once: apollo.Statuses allocates.
var wireStatuses = apollo.Statuses()

// decodeEvents parses an ingest body: one JSON object, a JSON array of
// objects, or (ndjson) one object per non-blank line. A body that is not
// JSON at all fails as a whole (err, with the byte offset); an element that
// is JSON but not a valid event (a wrong type, an unknown status) fails on
// its own, in bad[i], and the others go on. In NDJSON a broken line fails
// only its own event.
//
// A body with more than maxEvents elements fails with errTooManyEvents as
// soon as the one too many begins: an element costs a few hundred bytes
// of results however short it is ("1,"), so the count, not the body size,
// is what bounds the memory of a request.
func decodeEvents(body []byte, ndjson bool, maxEvents int) (evs []apollo.Event, bad []*apollo.Error, err error) {
	if evs, bad, err = decodeEventsInto(nil, nil, body, ndjson, maxEvents); err != nil {
		return nil, nil, err
	}
	return evs, bad, nil
}

// decodeEventsInto is decodeEvents decoding into evs[:0] and bad[:0],
// grown as needed, so that a caller can reuse them from one body to the
// next: the events, a hundred bytes each, were the largest allocation of
// an ingest request. On an error it returns the slices with what they
// hold, for the caller to clear before reusing them; only err counts.
func decodeEventsInto(evs []apollo.Event, bad []*apollo.Error, body []byte, ndjson bool, maxEvents int) ([]apollo.Event, []*apollo.Error, error) {
	if cap(evs) == 0 || cap(bad) == 0 {
		n := min(len(body)/128+1, 1024, maxEvents) // a guess at the count, to grow the slices rarely
		evs, bad = make([]apollo.Event, 0, n), make([]*apollo.Error, 0, n)
	}
	d := decoder{evs: evs[:0], bad: bad[:0], max: maxEvents}
	var err error
	if ndjson {
		d.decodeNDJSON(body)
	} else if e := d.decodeJSON(body); e != nil && !d.over {
		err = e
	}
	switch {
	case d.over:
		err = errTooManyEvents
	case err == nil && len(d.evs) == 0:
		err = &apollo.Error{Code: apollo.EINVALID, Message: "the body holds no event", Hint: "send one event object, a JSON array of them, or NDJSON"}
	}
	return d.evs, d.bad, err
}

// errTooManyEvents is decodeEvents' answer to a body over its maxEvents;
// the caller says which limit that was.
var errTooManyEvents = errors.New("httpapi: more elements than the request may hold")

// decoder holds what one body's events share.
type decoder struct {
	evs      []apollo.Event
	bad      []*apollo.Error // bad[i] is nil when evs[i] is good
	lastName string          // batches usually repeat one job name: keep one copy
	lastTask string          // and a run's events usually come together: one copy of its ID
	scratch  []byte          // unescaped strings, reused
	extras   []byte          // the request's extras, copied back to back (keep)
	max      int             // elements allowed
	over     bool            // one more began: decoding stopped
}

// room reports whether another element may begin, and stops decoding when
// not. It grows the slices as append would, but never past max: they are
// most of what a request of many short elements allocates.
func (d *decoder) room() bool {
	if d.over = len(d.evs) >= d.max; d.over {
		return false
	}
	if len(d.evs) == cap(d.evs) {
		n := min(2*cap(d.evs)+1, d.max)
		d.evs = append(make([]apollo.Event, 0, n), d.evs...)
		d.bad = append(make([]*apollo.Error, 0, n), d.bad...)
	}
	return true
}

// decodeJSON decodes a body of one value or an array of them.
func (d *decoder) decodeJSON(body []byte) *apollo.Error {
	lead := 0
	for lead < len(body) && isSpace(body[lead]) {
		lead++
	}
	s := scanner{buf: body[lead:], base: int64(lead)}
	ok := true
	if len(s.buf) > 0 && s.buf[0] == '[' {
		var more bool
		more, ok = s.open(']')
		for ok && more {
			if ok = d.element(&s); ok {
				more, ok = s.next(']')
			}
		}
	} else {
		ok = d.element(&s)
	}
	if ok && s.ws() < len(s.buf) {
		ok = s.fail("the end of the body")
	}
	if !ok {
		return s.err
	}
	return nil
}

// element decodes one value of the body: an event, or a value that is
// skipped and answered "not an object".
func (d *decoder) element(s *scanner) bool {
	if !d.room() {
		return false
	}
	at := s.pos
	d.evs = append(d.evs, apollo.Event{})
	if at < len(s.buf) && s.buf[at] == '{' {
		bad, ok := d.event(s, &d.evs[len(d.evs)-1])
		d.bad = append(d.bad, bad)
		return ok
	}
	d.bad = append(d.bad, notObject(s.base+int64(at)))
	return s.skip()
}

// decodeNDJSON decodes one event per non-blank line. Lines are cut and
// trimmed by bytes.Lines and bytes.TrimSpace, as they always were.
func (d *decoder) decodeNDJSON(body []byte) {
	off := 0
	for line := range bytes.Lines(body) {
		t := bytes.TrimSpace(line)
		at := off + cap(line) - cap(t) // t is a subslice of line
		off += len(line)
		if len(t) == 0 {
			continue
		}
		if !d.room() {
			return
		}
		d.evs = append(d.evs, apollo.Event{})
		if t[0] != '{' {
			d.bad = append(d.bad, notObject(int64(at)))
			continue
		}
		s := scanner{buf: t, base: int64(at)}
		bad, ok := d.event(&s, &d.evs[len(d.evs)-1])
		if ok && s.ws() < len(s.buf) {
			ok = s.fail("the end of the line")
		}
		if !ok {
			bad = s.err
		}
		d.bad = append(d.bad, bad)
	}
}

func notObject(off int64) *apollo.Error {
	return &apollo.Error{Code: apollo.EINVALID, Offset: off, Message: "an event must be a JSON object"}
}

// eventState is what an event's members leave to its end: the last extra,
// and the errors by rank.
type eventState struct {
	extra     []byte
	extraAt   int
	statusErr *apollo.Error // an unknown status outranks every other error
	err       *apollo.Error // the first value of a wrong type (or not UTF-8)
}

// event decodes the object at s.pos into e. A syntax error stops it (ok is
// false, s.err says where); a valid value that does not fit the event is
// returned as bad, after the whole object has been checked.
func (d *decoder) event(s *scanner, e *apollo.Event) (bad *apollo.Error, ok bool) {
	var st eventState
	more, ok := s.open('}')
	for ok && more {
		var key []byte
		var esc bool
		if key, esc, ok = s.key(); !ok {
			break
		}
		if esc {
			d.scratch, _ = unescape(d.scratch[:0], key)
			key = d.scratch
		}
		if ok = d.member(s, fieldOf(key), e, &st); ok {
			more, ok = s.next('}')
		}
	}
	if !ok {
		return nil, false
	}
	return st.settle(s, e, d), true
}

// keep copies an event's extra, which lies in the body at s.pos, into the
// request's chunk of extras: one allocation for the extras of many events
// of a request, where each had its own (issue 20.2). A chunk is written
// once, each piece capped at its end, and never changed; it is sized by
// what is left of the body (4 KiB at most), so a request keeps no more
// than its body's size in extras, and lives while an event, change or
// waiting event of the request holds a piece of it.
func (d *decoder) keep(s *scanner, x []byte) []byte {
	if cap(d.extras)-len(d.extras) < len(x) {
		d.extras = make([]byte, 0, max(len(x), min(len(x)+len(s.buf)-s.pos, extrasChunk)))
	}
	n := len(d.extras)
	d.extras = append(d.extras, x...)
	return d.extras[n:len(d.extras):len(d.extras)]
}

const extrasChunk = 4 << 10

// settle ends an event: the error that encoding/json would have reported,
// else extra's checks; extra is copied only now.
func (st *eventState) settle(s *scanner, e *apollo.Event, d *decoder) *apollo.Error {
	switch x := st.extra; {
	case st.statusErr != nil:
		return st.statusErr
	case st.err != nil:
		return st.err
	case x == nil || string(x) == "null":
	case x[0] != '{':
		return s.fieldErr(fExtra, st.extraAt, "extra must be a JSON object")
	case !validUTF8(x):
		return s.fieldErr(fExtra, st.extraAt, msgNotUTF8)
	default:
		e.Extra = d.keep(s, x)
	}
	return nil
}

// member decodes the value at s.pos into field f.
func (d *decoder) member(s *scanner, f int, e *apollo.Event, st *eventState) bool {
	at := s.pos
	if at >= len(s.buf) {
		return s.fail("a value")
	}
	c := s.buf[at]
	switch {
	case f == fUnknown || f == fExtra || c == 'n':
		// null leaves a field as it was; unknown fields are only checked;
		// extra is copied at the end, only the last one and only if good.
		if !s.skip() {
			return false
		}
		if f == fExtra {
			st.extra, st.extraAt = s.buf[at:s.pos], at
		}
		return true
	case f == fTaskID || f == fName || f == fStatus:
		if c != '"' {
			break
		}
		start, end, esc, ok := s.str()
		if !ok {
			return false
		}
		b, lone := s.buf[start:end], false
		if esc {
			d.scratch, lone = unescape(d.scratch[:0], b)
			b = d.scratch
		}
		switch {
		case f == fStatus:
			if st.statusErr == nil {
				e.Status, st.statusErr = s.status(b, at)
			}
		case !validUTF8(b):
			st.note(s.fieldErr(f, at, msgNotUTF8))
		case lone:
			err := s.fieldErr(f, at, msgLoneSurrogate)
			err.Hint = `escape a character above U+FFFF as a pair (\ud83d\ude00), or send it as UTF-8`
			st.note(err)
		case f == fTaskID:
			if string(b) != d.lastTask {
				d.lastTask = string(b) // one copy for a run's events side by side
			}
			e.TaskID = d.lastTask
		default:
			if string(b) != d.lastName {
				d.lastName = string(b) // one copy for a run of equal names
			}
			e.Name = d.lastName
		}
		return true
	case c == '-' || c >= '0' && c <= '9':
		n, isInt, ok := s.num()
		if !ok {
			return false
		}
		if isInt {
			*intField(e, f) = n
		} else {
			st.note(s.fieldErr(f, at, clip(s.buf[at:s.pos])+" is not an integer within int64"))
		}
		return true
	}
	want := "an integer"
	if f == fTaskID || f == fName || f == fStatus {
		want = "a string"
	}
	st.note(s.fieldErr(f, at, fmt.Sprintf("a JSON %s where %s belongs", kindOf(c), want)))
	return s.skip()
}

// note keeps the first error of an event.
func (st *eventState) note(err *apollo.Error) {
	if st.err == nil {
		st.err = err
	}
}

func (s *scanner) fieldErr(f, at int, msg string) *apollo.Error {
	return &apollo.Error{Code: apollo.EINVALID, Field: fieldNames[f], Offset: s.base + int64(at), Message: msg}
}

// status reads a status name; "" is StatusNone, as Status.UnmarshalText has it.
func (s *scanner) status(b []byte, at int) (apollo.Status, *apollo.Error) {
	if len(b) == 0 {
		return apollo.StatusNone, nil
	}
	for _, st := range wireStatuses {
		if string(b) == st.String() {
			return st, nil
		}
	}
	_, err := apollo.ParseStatus(clip(b))
	e := apiError(err)
	e.Offset = s.base + int64(at)
	return apollo.StatusNone, e
}

func intField(e *apollo.Event, f int) *int64 {
	switch f {
	case fSequence:
		return &e.Sequence
	case fTs:
		return &e.Ts
	case fScheduledAt:
		return &e.ScheduledAt
	case fTimeoutMs:
		return &e.TimeoutMs
	case fCostMs:
		return &e.CostMs
	}
	panic("httpapi: intField of a field that is not an integer")
}

// fieldOf maps a key to its field: the exact name first, then, as
// encoding/json does, any name equal under Unicode case folding.
func fieldOf(key []byte) int {
	switch string(key) { // compiled to a dispatch on length, then one compare
	case "taskID":
		return fTaskID
	case "name":
		return fName
	case "sequence":
		return fSequence
	case "status":
		return fStatus
	case "ts":
		return fTs
	case "scheduledAt":
		return fScheduledAt
	case "timeoutMs":
		return fTimeoutMs
	case "costMs":
		return fCostMs
	case "extra":
		return fExtra
	}
	for f := fTaskID; f < numFields; f++ {
		if bytes.EqualFold(key, []byte(fieldNames[f])) {
			return f
		}
	}
	return fUnknown
}
