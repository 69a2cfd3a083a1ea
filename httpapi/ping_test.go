package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// A ping start with no timeout and no end still ends (issue 15.9: the run
// stayed running with timeoutMs null): it shows the default deadline, and
// becomes timeout when it passes.
func TestPingStartWithoutTimeoutGetsTheDefault(t *testing.T) {
	t.Parallel()
	clock := apollo.NewFakeClock(time.Unix(1_800_000_000, 0))
	b, _ := bus.New(bus.Options{Clock: clock, Logger: discardLogger, DefaultTimeout: 3 * time.Hour, Retention: 24 * time.Hour})
	b.Start(context.Background())
	defer b.Stop()
	sub := b.Subscribe(10)
	srv := httptest.NewServer(New(Options{Bus: b, Clock: clock}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ping/nightly/start")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := strings.TrimSpace(strings.TrimPrefix(string(body), "OK "))
	if task, err := b.Get("", id); err != nil || task.TimeoutMs != (3*time.Hour).Milliseconds() {
		t.Fatalf("the started run %+v, %v: want the default deadline shown", task, err)
	}
	clock.Advance(3*time.Hour + time.Second)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case c := <-sub.C():
			if c.Task.TaskID == id && c.Task.Status == apollo.StatusTimeout {
				if c.Record.Kind != apollo.KindTimeout || c.Task.FinishedAt != clock.Now().Add(-time.Second).UnixMilli() {
					t.Errorf("timeout change %+v", c)
				}
				return
			}
		case <-timeout:
			t.Fatal("no timeout within 10s")
		}
	}
}
