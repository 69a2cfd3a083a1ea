package httpapi

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

type eventResult struct {
	Result string        `json:"result"`
	Error  *apollo.Error `json:"error,omitempty"`
}

type ingestAnswer struct {
	Results    []eventResult `json:"results"`
	Accepted   int           `json:"accepted"`
	Duplicate  int           `json:"duplicate"`
	Rejected   int           `json:"rejected"`
	RetryLater int           `json:"retryLater"`
	Held       int           `json:"held"`
	Waiting    int           `json:"waiting"`
	SlowDown   bool          `json:"slowDown,omitempty"`
}

// Hints for a body over the limit, one per kind of body: what the
// sender can do differs (a batch splits, a file does not).
const (
	hintEvents     = "send fewer events per request"
	hintFile       = " must fit in one request: shorten it, or raise limits.body_bytes in apollo.yaml"
	hintRulesFile  = "the whole rules file" + hintFile
	hintExpectFile = "the whole expectations file" + hintFile
	hintSilence    = "a silence is a few matchers and a short comment: send one with a shorter comment"
	hintCorrection = "a correction is a status and a short reason: shorten the reason"
)

// readBody reads a request body up to the server's limit; hint says what
// to do when it is over (one of the hint constants).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, hint string) ([]byte, error) {
	return s.readBodyInto(w, r, nil, hint)
}

// readBodyInto reads the body into buf (grown as needed, sized from
// Content-Length when the client sent one) and returns it. A body sent
// with Content-Encoding: gzip is inflated, and the limit holds for both
// the compressed and the inflated bytes, so a small bomb cannot grow past
// it.
func (s *Server) readBodyInto(w http.ResponseWriter, r *http.Request, buf []byte, hint string) ([]byte, error) {
	limit, gz := s.opts.MaxBodyBytes, false
	src := io.Reader(http.MaxBytesReader(w, r.Body, limit))
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		// bytes.Buffer.ReadFrom grows the buffer whenever less than
		// MinRead bytes are free, even for the read that finds EOF: room
		// for n+MinRead spares a copy at twice the size.
		if n := r.ContentLength; n > 0 && n <= limit && int64(cap(buf)) < n+bytes.MinRead {
			buf = make([]byte, 0, n+bytes.MinRead)
		}
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, bodyError(err, true, hint)
		}
		defer zr.Close()
		src, gz = io.LimitReader(zr, limit+1), true
	default:
		return nil, &apollo.Error{Code: apollo.EUNSUPPORTED, Field: "Content-Encoding", Message: "cannot read " + quoteInput(enc),
			Hint: "send the body as it is, or gzip it and say Content-Encoding: gzip"}
	}
	bb := bytes.NewBuffer(buf[:0])
	if _, err := bb.ReadFrom(src); err != nil {
		return nil, bodyError(err, gz, hint)
	}
	if int64(bb.Len()) > limit {
		return nil, tooLarge("the body inflates to more than "+strconv.FormatInt(limit, 10)+" bytes", hint)
	}
	return bb.Bytes(), nil
}

// bodyError says what went wrong reading a body, gzip-compressed or not.
func bodyError(err error, gz bool, hint string) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return tooLarge("the body is over "+strconv.FormatInt(mbe.Limit, 10)+" bytes", hint)
	case gz:
		return &apollo.Error{Code: apollo.EINVALID, Field: "Content-Encoding", Message: "the body is not valid gzip: " + err.Error(),
			Hint: "send Content-Encoding: gzip only with a gzip-compressed body"}
	}
	return &apollo.Error{Code: apollo.EINVALID, Message: "reading the body: " + err.Error()}
}

func tooLarge(msg, hint string) error {
	return &apollo.Error{Code: apollo.ETOOLARGE, Message: msg, Hint: hint}
}

// ingestBufs are the buffers of one ingest request, recycled through
// ingestPool: the decoder copies what it keeps of the body, and the bus
// copies what it keeps of the events, so once the answer is written
// nothing refers to them. A request then allocates only what its events
// leave behind.
type ingestBufs struct {
	body    []byte
	evs     []apollo.Event
	bad     []*apollo.Error
	outs    []apollo.Outcome
	results []eventResult
	answer  []byte
}

var ingestPool = sync.Pool{New: func() any { return new(ingestBufs) }}

// Buffers over these sizes go back to the heap, not to the pool: keep the
// buffers of ordinary batches, not of the odd huge one.
const (
	maxPooledBody   = 1 << 20
	maxPooledEvents = 1024
)

// release clears what the buffers hold and returns them to the pool.
func (ib *ingestBufs) release() {
	if cap(ib.body) > maxPooledBody {
		ib.body = nil
	}
	if cap(ib.evs) > maxPooledEvents {
		ib.evs, ib.bad, ib.outs, ib.results = nil, nil, nil, nil
	}
	if cap(ib.answer) > maxPooledBody {
		ib.answer = nil
	}
	// The events' strings and errors are the request's: let them go.
	clear(ib.evs)
	clear(ib.bad)
	clear(ib.outs)
	clear(ib.results)
	ib.evs, ib.bad, ib.outs, ib.results = ib.evs[:0], ib.bad[:0], ib.outs[:0], ib.results[:0]
	ingestPool.Put(ib)
}

// grow returns s with length n, reusing its array when it has room.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// eventsContentType says whether the body is NDJSON, or refuses the type.
// curl -d labels every body application/x-www-form-urlencoded: such a
// body is read as JSON when it looks like JSON, so that the one-line curl
// that everyone writes first works.
func eventsContentType(r *http.Request, body []byte) (ndjson bool, err error) {
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b && r.Header.Get("Content-Encoding") == "" {
		return false, &apollo.Error{Code: apollo.EUNSUPPORTED, Field: "Content-Encoding", Message: "the body is gzip-compressed, and no Content-Encoding says so",
			Hint: "add the header Content-Encoding: gzip (curl: --data-binary @file.gz -H 'Content-Encoding: gzip')"}
	}
	ct := r.Header.Get("Content-Type")
	switch ct {
	case "", "application/json":
		return false, nil // none: assume JSON; the usual one needs no parsing (it allocated its parameters' map)
	case "application/x-ndjson":
		return true, nil
	}
	mt, _, perr := mime.ParseMediaType(ct)
	switch {
	case perr != nil:
	case mt == "application/json":
		return false, nil
	case mt == "application/x-ndjson", mt == "application/ndjson", mt == "application/jsonl":
		return true, nil
	case mt == "application/x-www-form-urlencoded" && looksLikeJSON(body):
		return false, nil
	}
	return false, &apollo.Error{Code: apollo.EUNSUPPORTED, Field: "Content-Type", Message: "cannot read " + quoteInput(ct),
		Hint: "send application/json (an object or an array) or application/x-ndjson"}
}

func looksLikeJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}

// Limits on the elements of one ingest body (docs/protocol.md).
const (
	maxEventsPerRequest = 10_000
	// minEventBytes is well below the shortest event that can be
	// accepted: {"taskID":"a","sequence":1,"status":"failed","ts":946684800000}
	// is 62 bytes. A body with more elements than one per minEventBytes
	// holds junk ("1," or "{}"), and each element costs a few hundred bytes
	// of results: refusing it keeps a request's memory within a small
	// multiple of its body.
	minEventBytes = 48
)

// The limits that eventLimit may find binding.
const (
	byDensity = iota
	byRequest
	byRate
)

// eventLimit returns how many elements a body of size bytes from p may
// hold, and which limit that is: the least of one element per
// minEventBytes, the per-request limit, and p's rate (a request over its
// burst could never be let through).
func (s *Server) eventLimit(p *Principal, size int) (n, by int) {
	n, by = size/minEventBytes+1, byDensity
	if maxEventsPerRequest < n {
		n, by = maxEventsPerRequest, byRequest
	}
	if l, perSec := s.limiter(p); l != nil && perSec < n {
		n, by = perSec, byRate
	}
	return n, by
}

// overLimit is the answer to a body of size bytes with more than n
// elements, by the limit that bound.
func overLimit(n, by, size int) error {
	switch by {
	case byRate:
		// Not 429: the bucket never holds more than a second's worth, so
		// the same request would be refused for ever, and a reporter told
		// to wait and resend it did so (docs/protocol.md).
		return &apollo.Error{Code: apollo.ETOOLARGE,
			Message: fmt.Sprintf("more than %d events in one request, over this token's %d per second", n, n),
			Hint:    fmt.Sprintf("send at most %d per request, or ask an admin to raise the token's rate", n)}
	case byRequest:
		return &apollo.Error{Code: apollo.ETOOLARGE,
			Message: fmt.Sprintf("more than %d events in one request", n), Hint: fmt.Sprintf("send at most %d per request", n)}
	}
	return &apollo.Error{Code: apollo.EINVALID,
		Message: fmt.Sprintf("more than one element per %d bytes in a body of %d bytes: no event is that short", minEventBytes, size),
		Hint:    "send one JSON object per event"}
}

func (s *Server) postEvents(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if wait, err := s.ingestExhausted(p); err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		return err
	}
	ib := ingestPool.Get().(*ingestBufs)
	defer ib.release()
	body, err := s.readBodyInto(w, r, ib.body, hintEvents)
	if err != nil {
		return err
	}
	ib.body = body[:0]
	ndjson, err := eventsContentType(r, body)
	if err != nil {
		return err
	}
	maxEvents, by := s.eventLimit(p, len(body))
	evs, bad, err := decodeEventsInto(ib.evs, ib.bad, body, ndjson, maxEvents)
	ib.evs, ib.bad = evs, bad
	if errors.Is(err, errTooManyEvents) {
		return overLimit(maxEvents, by, len(body))
	}
	if err != nil {
		return err
	}
	if wait, err := s.allowIngest(p, len(evs)); err != nil {
		if wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		}
		return err
	}
	// Decode failures keep their place in the answer; the rest go to the
	// bus, compacted into good: an event is not read again once passed.
	// good shares evs' array, so evs[i] is read again below only through
	// bad[i], which the compaction leaves alone.
	good := evs[:0]
	for i := range evs {
		if bad[i] == nil {
			job, err := s.jobOf(p, &evs[i])
			if err == nil {
				err = p.mayReport(job)
			}
			if err != nil {
				bad[i] = apiError(err)
				continue
			}
			evs[i].Tenant = p.Tenant
			good = append(good, evs[i])
		}
	}
	outs := grow(ib.outs, len(good))
	ib.outs = outs
	if err := s.opts.Bus.Publish(r.Context(), good, outs); err != nil {
		s.log.Error("ingest: the log failed", "err", err)
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the events could not be made durable", Hint: "resend them later"}
	}
	ans := ingestAnswer{Results: grow(ib.results, len(evs))}
	ib.results = ans.Results
	j := 0
	for i := range evs {
		var o apollo.Outcome
		if bad[i] != nil {
			o = apollo.Outcome{Result: apollo.ResultRejected, Err: bad[i]}
			if bad[i].Code == apollo.EUNAVAILABLE { // its job could not be looked up
				o.Result = apollo.ResultRetryLater
			}
		} else {
			o = outs[j]
			if p.JobPrefix != "" {
				o.Err = hideOtherJob(o.Err, &good[j])
			}
			j++
		}
		ans.Results[i] = eventResult{Result: o.Result.String(), Error: o.Err}
		switch o.Result {
		case apollo.ResultAccepted:
			ans.Accepted++
		case apollo.ResultHeld:
			ans.Held++
		case apollo.ResultDuplicate:
			ans.Duplicate++
		case apollo.ResultRejected:
			ans.Rejected++
		case apollo.ResultRetryLater:
			ans.RetryLater++
		case apollo.ResultWaiting:
			ans.Waiting++
		}
	}
	status := http.StatusOK
	if ans.Held > 0 {
		ans.SlowDown = true
		w.Header().Set("Retry-After", "1")
	}
	if ans.RetryLater > 0 {
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if n := ans.size(); cap(ib.answer) < n {
		ib.answer = make([]byte, 0, n)
	}
	ib.answer = ans.appendJSON(ib.answer[:0])
	w.Write(ib.answer)
	return nil
}

// size is about the length of the answer's JSON, so that appendJSON
// rarely grows its buffer: a copy at twice the size of an answer with an
// error per event was the largest allocation of a request of bad events.
func (a *ingestAnswer) size() int {
	n := 128
	for _, r := range a.Results {
		n += 16 + len(r.Result)
		if e := r.Error; e != nil {
			n += 64 + len(e.Code) + len(e.Field) + len(e.Message) + len(e.Hint)
		}
	}
	return n
}

// jobOf returns the job an event reports for: its name, or for an event
// without one, the job its task already belongs to (its task ID for a new
// task). For a token limited to a job prefix the event's name is filled in
// with that job, so that the bus holds the check under its lock: it
// refuses an event naming another job than its task's, should the task
// have been created meanwhile by another reporter (issue 16.5).
// It fails when the bus cannot tell the task's job now (a cluster node
// whose owner is changing): the event is then answered retry_later.
func (s *Server) jobOf(p *Principal, ev *apollo.Event) (string, error) {
	if ev.Name != "" || p.JobPrefix == "" {
		return ev.JobName(), nil
	}
	job, err := s.opts.Bus.JobOf(p.Tenant, ev.TaskID)
	if err != nil {
		return "", err
	}
	ev.Name = cmp.Or(job, ev.TaskID)
	return ev.Name, nil
}

// hideOtherJob words the bus's refusal of an event for a task of another
// job (a conflict on "name", bus.checkOwner) without naming that job, for
// a token limited to a job prefix: it may read nothing of the other jobs,
// and trying task IDs would otherwise list their names.
func hideOtherJob(e *apollo.Error, ev *apollo.Event) *apollo.Error {
	if e == nil || e.Code != apollo.ECONFLICT || e.Field != "name" {
		return e
	}
	return &apollo.Error{Code: e.Code, Field: e.Field,
		Message: fmt.Sprintf("task %q belongs to another job, not %q", ev.TaskID, ev.Name),
		Hint:    "a task belongs to the job its first event named; report this job's run under a new task ID"}
}

// appendJSON appends the answer as writeJSON would encode it, byte for
// byte, without reflection: it is written for every ingest request.
func (a *ingestAnswer) appendJSON(b []byte) []byte {
	b = append(b, `{"results":`...)
	if a.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, r := range a.Results {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(append(b, `{"result":`...), r.Result)
			if e := r.Error; e != nil {
				b = appendJSONString(append(b, `,"error":{"code":`...), e.Code)
				if e.Field != "" {
					b = appendJSONString(append(b, `,"field":`...), e.Field)
				}
				b = appendJSONString(append(b, `,"message":`...), e.Message)
				if e.Hint != "" {
					b = appendJSONString(append(b, `,"hint":`...), e.Hint)
				}
				if e.Offset != 0 {
					b = strconv.AppendInt(append(b, `,"offset":`...), e.Offset, 10)
				}
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	for _, c := range [...]struct {
		key string
		n   int
	}{{`,"accepted":`, a.Accepted}, {`,"duplicate":`, a.Duplicate}, {`,"rejected":`, a.Rejected}, {`,"retryLater":`, a.RetryLater}, {`,"held":`, a.Held}, {`,"waiting":`, a.Waiting}} {
		b = strconv.AppendInt(append(b, c.key...), int64(c.n), 10)
	}
	if a.SlowDown {
		b = append(b, `,"slowDown":true`...)
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s quoted as encoding/json quotes it with HTML
// escaping off: '"', '\\' and control characters escaped, bytes that are
// not UTF-8 as \ufffd, and U+2028 and U+2029 escaped for JavaScript's sake.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if e := shortEscape[c]; e != 0 {
				b = append(b, '\\', e)
			} else {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
			start = i + n
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + n
		}
		i += n
	}
	return append(append(b, s[start:]...), '"')
}

// shortEscape holds the letter of the two-byte escape of the bytes that have one.
var shortEscape = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

const hexDigits = "0123456789abcdef"
