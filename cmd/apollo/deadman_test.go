package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// call is one request the sink received.
type call struct {
	method, path, query, body string
}

// sink is a heartbeat receiver: every request goes to C; it answers
// status as it was when the request came (200 unless set).
type sink struct {
	srv    *httptest.Server
	C      chan call
	status atomic.Int32
}

func newSink(t *testing.T) *sink {
	s := &sink{C: make(chan call, 100)}
	s.status.Store(200)
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		status := int(s.status.Load()) // before the test hears of the call and changes it
		s.C <- call{r.Method, r.URL.Path, r.URL.RawQuery, string(b)}
		w.WriteHeader(status)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-s.C:
		return c
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no heartbeat within 30s")
		return call{}
	}
}

// The dead man's switch calls its URL at once and then every interval of
// the clock, with {process} filled in; a URL that fails is counted and
// the calls go on; POST says who calls; stop ends the calls.
func TestDeadmanBeatsOnTheClock(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := apollo.NewFakeClock(t0)
	s := newSink(t)
	cfg := config.Default().Deadman // every 5m, GET
	cfg.URL = s.srv.URL + "/ping/apollo_{process}?key=k1"
	d := startDeadman(cfg, "bus", clock, slog.New(slog.DiscardHandler))
	if c := s.next(t); c.method != "GET" || c.path != "/ping/apollo_bus" || c.query != "key=k1" {
		t.Fatalf("first call %+v", c)
	}
	clock.Advance(4 * time.Minute)
	s.status.Store(503) // the watcher is down for a while
	clock.Advance(time.Minute)
	s.next(t)
	clock.Advance(5 * time.Minute)
	s.next(t)
	s.status.Store(200)
	clock.Advance(5 * time.Minute)
	s.next(t)
	eventually(t, 30*time.Second, "the last call answered", func() bool { return d.sent.Load() == 2 })
	d.stop()
	if n := len(s.C); n != 0 {
		t.Errorf("%d calls more than the clock asked for", n)
	}
	st := d.stats().(map[string]any)
	if st["sent"] != int64(2) || st["failed"] != int64(2) || st["lastError"] != "" || !st["lastOK"].(time.Time).Equal(t0.Add(15*time.Minute)) {
		t.Errorf("stats %v: want 2 sent, 2 failed, the last good one at 15m", st)
	}
	if st["target"] != s.srv.URL || strings.Contains(st["target"].(string), "k1") {
		t.Errorf("target %q: want the scheme and host only (the key stays private)", st["target"])
	}

	cfg.Method, cfg.URL = "POST", s.srv.URL+"/hook"
	d = startDeadman(cfg, "alert", clock, slog.New(slog.DiscardHandler))
	c := s.next(t)
	d.stop()
	var who map[string]string
	if err := json.Unmarshal([]byte(c.body), &who); err != nil || c.method != "POST" || who["source"] != "apollo-11" ||
		who["process"] != "alert" || who["id"] != processID() {
		t.Errorf("POST %+v (%v): want JSON naming the process", c, err)
	}
	if startDeadman(config.Default().Deadman, "bus", clock, slog.New(slog.DiscardHandler)) != nil {
		t.Error("a dead man's switch without a URL")
	}
}

// How to watch one Apollo-11 with another (docs/monitoring.md): A's dead
// man's switch pings B's /ping URL; B has a rule that fires when the pings
// stop. Both servers run on fake clocks: A's beats come when its clock
// moves, B's rule decides when B's does.
func TestWatchOneApolloWithAnother(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	h := newHook(t)
	dirB := t.TempDir()
	cfgB := testConfig(t)
	cfgB.Rules = filepath.Join(dirB, "rules.txt")
	cfgB.Channels = map[string]map[string]any{"hook": {"type": "webhook", "url": h.srv.URL}}
	os.WriteFile(cfgB.Rules, []byte(`RULE apollo_a_silent task_prefix: "apollo_a_" BY: name WINDOW: 15m THRESHOLD: count == 0 NOTIFY: hook`+"\n"), 0o644)
	clockB := apollo.NewFakeClock(t0)
	addrB, _, _ := inProcessWith(t, cfgB, clockB)

	cfgA := testConfig(t)
	cfgA.Deadman.URL = "http://" + addrB + "/ping/apollo_a_{process}"
	clockA := apollo.NewFakeClock(t0)
	_, _, stopA := inProcessWith(t, cfgA, clockA)
	runs := func(n int) {
		t.Helper()
		eventually(t, 30*time.Second, "B has the pings of A", func() bool {
			var l struct{ Tasks []apollo.Task }
			apiGet(t, addrB, "/api/v1/tasks?prefix=apollo_a_server", &l)
			return len(l.Tasks) == n
		})
	}
	runs(1) // A's first beat, at start
	clockA.Advance(5 * time.Minute)
	clockB.Advance(5 * time.Minute) // B evaluates: one run in the window
	runs(2)
	clockB.Advance(5 * time.Minute)
	if err := stopA(); err != nil { // A goes away; its beats stop
		t.Fatal(err)
	}
	clockB.Advance(10*time.Minute + time.Second) // 15m after the last ping
	p := h.await(t, 30*time.Second, "apollo_a_silent", func(p webhook.ApolloPayload) bool {
		return p.Alert.Rule == "apollo_a_silent" && p.Kind == apollo.NotifyFiring
	})
	if p.Alert.Value != 0 {
		t.Errorf("fired with count %v, want 0", p.Alert.Value)
	}
}

// A heartbeat URL that answers with a redirect (a watcher moved, or put
// behind a sign-in proxy) is a failed call that says where it pointed,
// not a success: the redirect is not followed. Before, the client
// followed it to the sign-in page, whose 200 counted as sent, while the
// watcher heard nothing and would page that this server is down.
func TestDeadmanDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	login := newSink(t)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, login.srv.URL+"/sign-in?next="+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(proxy.Close)
	cfg := testConfig(t)
	cfg.Deadman.URL = proxy.URL + "/ping/s3cret-{process}"
	addr, logs, _ := inProcessWith(t, cfg, apollo.NewFakeClock(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)))
	var sys struct {
		Deadman struct {
			Sent, Failed int64
			LastError    string
		}
	}
	eventually(t, 30*time.Second, "the first heartbeat told", func() bool {
		apiGet(t, addr, "/api/v1/system", &sys)
		return sys.Deadman.Sent+sys.Deadman.Failed > 0
	})
	if sys.Deadman.Sent != 0 || sys.Deadman.Failed != 1 || !strings.Contains(sys.Deadman.LastError, "302 Found") ||
		!strings.Contains(sys.Deadman.LastError, "it pointed to "+login.srv.URL) || strings.Contains(sys.Deadman.LastError, "s3cret") {
		t.Errorf("deadman %+v: want one failed call that names where the redirect pointed, without the URL's path", sys.Deadman)
	}
	if n := len(login.C); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	if l := logs.String(); strings.Contains(l, "s3cret") {
		t.Errorf("the URL's path is in the log: %s", l)
	}
}
