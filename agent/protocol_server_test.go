package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// protocolServer implements POST /api/v1/events as docs/protocol.md says:
// per-task sequence idempotence, the transition table, events that skip
// ahead answered waiting and parked until the gap fills (this server never
// ends a wait on its own), per-event results with tallies, and the
// request-level status codes. Tests script failures on top: the next
// requests fail with a status, events answered retry_later, a hang, or the
// whole server going down and coming back on the same address.
type protocolServer struct {
	t     testing.TB
	token string
	// maxBody bounds a request's body; tests change it while the
	// client's sender may already be sending.
	maxBody atomic.Int64

	mu      sync.Mutex
	srv     *httptest.Server
	addr    string
	tasks   map[string]*serverTask
	stored  []apollo.Event // applied events, in the order they were applied
	script  []scripted
	retryOf func(apollo.Event) bool // answer retry_later for these
	// retryAfter is the Retry-After sent with retry_later and slowDown
	// answers, in seconds; 0 sends none.
	retryAfter int
	slowDown   bool
	// hang, when set, blocks requests (after storing their events if
	// hangAfterStore) until it is closed or the client gives up.
	hang           chan struct{}
	hangAfterStore bool
	hanging        chan struct{} // receives once per request that starts hanging

	requests chan request
}

type serverTask struct {
	last   int64
	status apollo.Status
	parked map[int64]apollo.Event
}

// scripted is a canned answer for one upcoming request.
type scripted struct {
	status     int
	retryAfter int
}

// request is what a test sees of one request the server read.
type request struct {
	events []apollo.Event
	status int
	auth   string // the Authorization header it came with
}

func newProtocolServer(t testing.TB) *protocolServer {
	s := startProtocolServer()
	s.t = t
	t.Cleanup(s.close)
	return s
}

func startProtocolServer() *protocolServer {
	s := &protocolServer{
		tasks:      map[string]*serverTask{},
		retryAfter: 1,
		hanging:    make(chan struct{}, 100),
		requests:   make(chan request, 10_000),
	}
	s.maxBody.Store(4 << 20)
	s.srv = httptest.NewServer(s)
	s.addr = s.srv.Listener.Addr().String()
	return s
}

func (s *protocolServer) URL() string { return "http://" + s.addr }

func (s *protocolServer) close() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	s.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// down closes the listener: clients get "connection refused".
func (s *protocolServer) down() { s.close() }

// up listens again on the same address.
func (s *protocolServer) up() {
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		s.t.Fatalf("protocol server: listen again on %s: %v", s.addr, err)
	}
	srv := httptest.NewUnstartedServer(s)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// failNext makes the next n requests answer status, without storing.
func (s *protocolServer) failNext(n, status, retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.script = append(s.script, scripted{status, retryAfter})
	}
}

func (s *protocolServer) setHang(afterStore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hang, s.hangAfterStore = make(chan struct{}), afterStore
}

func (s *protocolServer) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
}

// next waits for the next request the server read.
func (s *protocolServer) next(t testing.TB) request {
	t.Helper()
	select {
	case r := <-s.requests:
		return r
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("protocol server: no request")
		return request{}
	}
}

// storedFor returns the sequences applied for one task, in order.
func (s *protocolServer) storedFor(taskID string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var seqs []int64
	for _, e := range s.stored {
		if e.TaskID == taskID {
			seqs = append(seqs, e.Sequence)
		}
	}
	return seqs
}

func (s *protocolServer) storedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.stored)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, e *apollo.Error) {
	writeJSON(w, status, map[string]any{"error": e})
}

func (s *protocolServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/events" {
		writeError(w, http.StatusNotFound, apollo.Errorf(apollo.ENOTFOUND, "no route %s %s", r.Method, r.URL.Path))
		return
	}
	if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
		writeError(w, http.StatusUnauthorized, apollo.Errorf(apollo.EUNAUTHORIZED, "missing or bad token"))
		return
	}
	ctype, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ctype != "application/json" && ctype != "application/x-ndjson" {
		writeError(w, http.StatusUnsupportedMediaType, apollo.Errorf(apollo.EUNSUPPORTED, "content type %q", ctype))
		return
	}
	maxBody := s.maxBody.Load()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, apollo.Errorf(apollo.ETOOLARGE, "body over %d bytes", maxBody))
		return
	}
	events, err := decodeEvents(body, ctype == "application/x-ndjson")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.(*apollo.Error))
		return
	}
	s.mu.Lock()
	if len(s.script) > 0 {
		sc := s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
		s.requests <- request{events: events, status: sc.status, auth: r.Header.Get("Authorization")}
		if sc.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(sc.retryAfter))
		}
		writeError(w, sc.status, apollo.Errorf(apollo.EUNAVAILABLE, "scripted failure"))
		return
	}
	hang, afterStore := s.hang, s.hangAfterStore
	if hang != nil && !afterStore {
		s.mu.Unlock()
		s.hangUntil(hang, r)
		return
	}
	resp, status := s.apply(events)
	s.mu.Unlock()
	s.requests <- request{events: events, status: status, auth: r.Header.Get("Authorization")}
	if hang != nil {
		s.hangUntil(hang, r)
		return
	}
	if resp.RetryLater > 0 || resp.SlowDown {
		if s.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(s.retryAfter))
		}
	}
	writeJSON(w, status, resp)
}

func (s *protocolServer) hangUntil(hang chan struct{}, r *http.Request) {
	s.hanging <- struct{}{}
	select {
	case <-hang:
	case <-r.Context().Done():
	}
}

// decodeEvents reads a JSON object, a JSON array or NDJSON.
func decodeEvents(body []byte, ndjson bool) ([]apollo.Event, error) {
	bad := func(err error) error {
		e := &apollo.Error{Code: apollo.EINVALID, Message: err.Error()}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			e.Offset = se.Offset
		}
		return e
	}
	if ndjson {
		var events []apollo.Event
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			var e apollo.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				return nil, bad(err)
			}
			events = append(events, e)
		}
		return events, nil
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var e apollo.Event
		if err := json.Unmarshal(trimmed, &e); err != nil {
			return nil, bad(err)
		}
		return []apollo.Event{e}, nil
	}
	var events []apollo.Event
	if err := json.Unmarshal(trimmed, &events); err != nil {
		return nil, bad(err)
	}
	return events, nil
}

// apply answers each event and stores the ones it accepts; s.mu is held.
func (s *protocolServer) apply(events []apollo.Event) (response, int) {
	resp := response{Results: make([]result, len(events)), SlowDown: s.slowDown}
	// Once an event of a task is answered retry_later, so are the task's
	// later events in the request: storing them would apply a run's steps
	// out of order.
	deferred := map[string]bool{}
	for i, ev := range events {
		o, e := outcomeRetryLater, (*apollo.Error)(nil)
		if !deferred[ev.TaskID] {
			o, e = s.applyOne(ev)
		}
		if o == outcomeRetryLater {
			deferred[ev.TaskID] = true
		}
		resp.Results[i] = result{Result: o, Error: e}
		switch o {
		case outcomeAccepted:
			resp.Accepted++
		case outcomeDuplicate:
			resp.Duplicate++
		case outcomeRejected:
			resp.Rejected++
		case outcomeRetryLater:
			resp.RetryLater++
		case outcomeWaiting:
			resp.Waiting++
		}
	}
	if resp.RetryLater > 0 {
		return resp, http.StatusTooManyRequests
	}
	return resp, http.StatusOK
}

func (s *protocolServer) applyOne(ev apollo.Event) (outcome, *apollo.Error) {
	if err := ev.Validate(); err != nil {
		return outcomeRejected, err.(*apollo.Error)
	}
	if s.retryOf != nil && s.retryOf(ev) {
		return outcomeRetryLater, nil
	}
	t := s.tasks[ev.TaskID]
	if t == nil {
		t = &serverTask{parked: map[int64]apollo.Event{}}
		s.tasks[ev.TaskID] = t
	}
	switch {
	case ev.Sequence <= t.last:
		return outcomeDuplicate, nil
	case apollo.CanTransition(t.status, ev.Status):
		s.store(t, ev)
		s.unpark(t)
		return outcomeAccepted, nil
	case ev.Sequence > t.last+1:
		t.parked[ev.Sequence] = ev // held until the missing events arrive
		return outcomeWaiting, nil
	}
	return outcomeRejected, &apollo.Error{Code: apollo.ECONFLICT, Field: "status",
		Message: fmt.Sprintf("%s cannot follow %s", ev.Status, t.status)}
}

func (s *protocolServer) store(t *serverTask, ev apollo.Event) {
	t.last, t.status = ev.Sequence, ev.Status
	s.stored = append(s.stored, ev)
}

// unpark applies parked events that became next and legal, and forgets the
// ones that became duplicates.
func (s *protocolServer) unpark(t *serverTask) {
	for {
		seqs := make([]int64, 0, len(t.parked))
		for q := range t.parked {
			seqs = append(seqs, q)
		}
		slices.Sort(seqs)
		progressed := false
		for _, q := range seqs {
			ev := t.parked[q]
			switch {
			case q <= t.last:
				delete(t.parked, q)
			case apollo.CanTransition(t.status, ev.Status):
				delete(t.parked, q)
				s.store(t, ev)
				progressed = true
			}
		}
		if !progressed {
			return
		}
	}
}
