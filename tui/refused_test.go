package tui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/stream"
)

// A tenant at its limit of streams (limits.tenant_stream_clients) had its
// dashboard refused, and the header said only "the server answered 429
// Too Many Requests": not which limit, nor what to do. It now says the
// server's reason, keeps retrying, and goes live once a place is free;
// another tenant is not concerned.
func TestStreamRefusedOverItsLimitSaysWhy(t *testing.T) {
	t.Parallel()
	ls := newLiveServerWith(t, func(o *stream.Options) { o.TenantClients = 1 })
	ctx := testwait.Context(t)
	held, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ls.srv.URL, "http")+"/api/v1/stream", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer acme-view"}}, Subprotocols: []string{apiclient.StreamProtocol}})
	if err != nil {
		t.Fatal(err)
	}
	defer held.CloseNow()
	if _, _, err := held.Read(ctx); err != nil { // hello: the hub counts it
		t.Fatal(err)
	}
	go func() { // reading answers the hub's pings, so it keeps the stream
		for {
			if _, _, err := held.Read(ctx); err != nil {
				return
			}
		}
	}()

	open := func(token string) (watched, *teatest.TestModel) {
		m, err := New(Options{Server: ls.srv.URL, Token: token, Refresh: -1, ReconnectMin: 50 * time.Millisecond, ReconnectMax: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		w := watch(m)
		return w, teatest.NewTestModel(t, w, teatest.WithInitialTermSize(400, 40))
	}
	acme, acmeTM := open("acme-view")
	acme.until(t, "the server's reason in the header", func(sc screen) bool {
		return sc.state != stateLive && strings.Contains(sc.text, `tenant "acme" has 1 streams open, its limit`) &&
			strings.Contains(sc.text, "limits.tenant_stream_clients")
	})
	globex, globexTM := open("globex-view")
	globex.untilText(t, "● live")

	held.Close(websocket.StatusNormalClosure, "")
	acme.untilText(t, "● live")
	for _, tm := range []*teatest.TestModel{acmeTM, globexTM} {
		tm.Quit()
		tm.WaitFinished(t, teatest.WithFinalTimeout(10*time.Second))
	}
}

// The reason a server gives for refusing the stream is its text: it is
// shown escaped, as everything else the server says.
func TestStreamRefusalReasonIsEscaped(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":{"code":"too_many","message":` + mustJSON("busy "+evil+"\r\nline two") + `,"hint":` + mustJSON("wait "+evil) + `}}`))
	}))
	t.Cleanup(srv.Close)
	m, err := New(Options{Server: srv.URL, Token: "test-token", Clock: apollo.NewFakeClock(t0), NoColor: true, Refresh: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	m.Update(tea.WindowSizeMsg{Width: 400, Height: 40})
	_, err = dialStream(testwait.Context(t), "ws"+strings.TrimPrefix(srv.URL, "http")+"/api/v1/stream", "test-token", nil)
	if apollo.ErrorCode(err) != apollo.ETOOMANY {
		t.Fatalf("dial: %v (code %q), want too_many", err, apollo.ErrorCode(err))
	}
	m.Update(dialedMsg{gen: m.conn.gen, err: err})
	out := m.render()
	if injected.MatchString(out) || strings.Contains(out, "\r\n") {
		t.Errorf("the refusal's reason reached the terminal unescaped:\n%q", out)
	}
	if !strings.Contains(out, "busy "+evilEscaped) || !strings.Contains(out, "wait "+evilEscaped) {
		t.Errorf("the refusal's reason is not shown:\n%s", out)
	}
}
