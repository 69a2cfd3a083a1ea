package harness

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Sink is a webhook receiver: an HTTP server on loopback that answers
// every request 200 and keeps when each body arrived.
type Sink struct {
	URL     string // http://127.0.0.1:PORT
	srv     *http.Server
	mu      sync.Mutex
	msgs    []Message
	arrived chan struct{} // closed and replaced on every message
}

// Message is one request the sink took.
type Message struct {
	At   time.Time // when its request reached the handler
	Path string
	Body []byte
}

// NewSink starts a sink; Close stops it.
func NewSink() (*Sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Sink{URL: "http://" + ln.Addr().String(), arrived: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		s.mu.Lock()
		s.msgs = append(s.msgs, Message{At: at, Path: r.URL.Path, Body: body})
		close(s.arrived)
		s.arrived = make(chan struct{})
		s.mu.Unlock()
	})}
	go s.srv.Serve(ln)
	return s, nil
}

// Reset forgets the messages so far.
func (s *Sink) Reset() {
	s.mu.Lock()
	s.msgs = nil
	s.mu.Unlock()
}

// Wait returns the first message since the last Reset for which done,
// called on each message in order of arrival, says true; false if none
// has within d.
func (s *Sink) Wait(d time.Duration, done func(Message) bool) (Message, bool) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	seen := 0
	for {
		s.mu.Lock()
		msgs, arrived := s.msgs, s.arrived
		s.mu.Unlock()
		for ; seen < len(msgs); seen++ {
			if done(msgs[seen]) {
				return msgs[seen], true
			}
		}
		select {
		case <-arrived:
		case <-deadline.C:
			return Message{}, false
		}
	}
}

// Close stops the server.
func (s *Sink) Close() { s.srv.Close() }
