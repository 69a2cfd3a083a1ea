package httpapi

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

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
	SlowDown   bool          `json:"slowDown,omitempty"`
}

// readBody reads a request body up to the server's limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, &apollo.Error{Code: apollo.ETOOLARGE, Message: "the body is over " + strconv.FormatInt(mbe.Limit, 10) + " bytes",
			Hint: "send fewer events per request"}
	case err != nil:
		return nil, &apollo.Error{Code: apollo.EINVALID, Message: "reading the body: " + err.Error()}
	}
	return body, nil
}

// eventsContentType says whether the body is NDJSON, or refuses the type.
func eventsContentType(r *http.Request) (ndjson bool, err error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false, nil // curl and friends: assume JSON
	}
	mt, _, perr := mime.ParseMediaType(ct)
	switch {
	case perr != nil:
	case mt == "application/json":
		return false, nil
	case mt == "application/x-ndjson", mt == "application/ndjson", mt == "application/jsonl":
		return true, nil
	}
	return false, &apollo.Error{Code: apollo.EUNSUPPORTED, Field: "Content-Type", Message: "cannot read " + strconv.Quote(ct),
		Hint: "send application/json (an object or an array) or application/x-ndjson"}
}

func (s *Server) postEvents(w http.ResponseWriter, r *http.Request, p *Principal) error {
	ndjson, err := eventsContentType(r)
	if err != nil {
		return err
	}
	body, err := s.readBody(w, r)
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
			if err := p.mayReport(evs[i].JobName()); err != nil {
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
	writeJSON(w, status, ans)
	return nil
}
