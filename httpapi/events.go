package httpapi

import (
	"bytes"
	"cmp"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
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

// readBody reads a request body up to the server's limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return s.readBodyInto(w, r, nil)
}

// readBodyInto reads the body into buf (grown as needed, sized from
// Content-Length when the client sent one) and returns it.
func (s *Server) readBodyInto(w http.ResponseWriter, r *http.Request, buf []byte) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= s.opts.MaxBodyBytes && int64(cap(buf)) < n+1 {
		buf = make([]byte, 0, n+1) // +1: reading EOF needs no second growth
	}
	bb := bytes.NewBuffer(buf[:0])
	_, err := bb.ReadFrom(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, &apollo.Error{Code: apollo.ETOOLARGE, Message: "the body is over " + strconv.FormatInt(mbe.Limit, 10) + " bytes",
			Hint: "send fewer events per request"}
	case err != nil:
		return nil, &apollo.Error{Code: apollo.EINVALID, Message: "reading the body: " + err.Error()}
	}
	return bb.Bytes(), nil
}

// bodyPool recycles ingest bodies: the decoder copies what it keeps, so a
// body is free again once decoded.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// eventsContentType says whether the body is NDJSON, or refuses the type.
// curl -d labels every body application/x-www-form-urlencoded: such a
// body is read as JSON when it looks like JSON, so that the one-line curl
// that everyone writes first works.
func eventsContentType(r *http.Request, body []byte) (ndjson bool, err error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false, nil // assume JSON
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
	return false, &apollo.Error{Code: apollo.EUNSUPPORTED, Field: "Content-Type", Message: "cannot read " + strconv.Quote(ct),
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

func (s *Server) postEvents(w http.ResponseWriter, r *http.Request, p *Principal) error {
	if wait, err := s.ingestExhausted(p); err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		return err
	}
	pooled := bodyPool.Get().(*[]byte)
	defer bodyPool.Put(pooled)
	body, err := s.readBodyInto(w, r, *pooled)
	if err != nil {
		return err
	}
	if cap(body) <= 1<<20 { // keep buffers of ordinary batches, not of the odd huge one
		*pooled = body[:0]
	}
	ndjson, err := eventsContentType(r, body)
	if err != nil {
		return err
	}
	evs, bad, err := decodeEvents(body, ndjson)
	if err != nil {
		return err
	}
	if wait, err := s.allowIngest(p, len(evs)); err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		return err
	}
	// Decode failures keep their place in the answer; the rest go to the bus.
	good := evs[:0:0]
	for i := range evs {
		if bad[i] == nil {
			if err := p.mayReport(s.jobOf(p, &evs[i])); err != nil {
				bad[i] = err.(*apollo.Error)
				continue
			}
			evs[i].Tenant = p.Tenant
			good = append(good, evs[i])
		}
	}
	outs := make([]bus.Outcome, len(good))
	if err := s.opts.Bus.Publish(r.Context(), good, outs); err != nil {
		s.log.Error("ingest: the log failed", "err", err)
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the events could not be made durable", Hint: "resend them later"}
	}
	ans := ingestAnswer{Results: make([]eventResult, len(evs))}
	j := 0
	for i := range evs {
		var o bus.Outcome
		if bad[i] != nil {
			o = bus.Outcome{Result: bus.Rejected, Err: bad[i]}
		} else {
			o = outs[j]
			j++
		}
		ans.Results[i] = eventResult{Result: o.Result.String(), Error: o.Err}
		switch o.Result {
		case bus.Accepted:
			ans.Accepted++
		case bus.Held:
			ans.Held++
		case bus.Duplicate:
			ans.Duplicate++
		case bus.Rejected:
			ans.Rejected++
		case bus.RetryLater:
			ans.RetryLater++
		case bus.Waiting:
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
	w.Write(ans.appendJSON(make([]byte, 0, 128+32*len(ans.Results))))
	return nil
}

// jobOf returns the job an event reports for: its name, or for an event
// without one, the job its task already belongs to (its task ID for a new
// task). For a token limited to a job prefix the event's name is filled in
// with that job, so that the bus holds the check under its lock: it
// refuses an event naming another job than its task's, should the task
// have been created meanwhile by another reporter (issue 16.5).
func (s *Server) jobOf(p *Principal, ev *apollo.Event) string {
	if ev.Name != "" || p.JobPrefix == "" {
		return ev.JobName()
	}
	ev.Name = cmp.Or(s.opts.Bus.JobOf(p.Tenant, ev.TaskID), ev.TaskID)
	return ev.Name
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
