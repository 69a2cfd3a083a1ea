package harness

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSink(t *testing.T) {
	s, err := NewSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(path, body string) {
		resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	post("/old", "before the reset")
	s.Reset()
	go func() {
		post("/a", "first")
		post("/b", "second")
	}()
	m, ok := s.Wait(time.Minute, func(m Message) bool { return m.Path == "/b" })
	if !ok || string(m.Body) != "second" || m.At.IsZero() {
		t.Fatalf("Wait = %+v, %v; want the second message", m, ok)
	}
	var seen []string
	s.Wait(time.Minute, func(m Message) bool { seen = append(seen, m.Path); return m.Path == "/b" })
	if strings.Join(seen, " ") != "/a /b" {
		t.Fatalf("messages since the reset: %v, want /a /b in order", seen)
	}
	if _, ok := s.Wait(10*time.Millisecond, func(Message) bool { return false }); ok {
		t.Fatal("Wait found a message that matches nothing")
	}
}
