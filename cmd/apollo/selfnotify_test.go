package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/testwait"
)

// The bus tells that no alert process runs through the default tenant's
// channels, as the alert engine's self-alerts go (docs/notifications.md):
// a channel of one tenant hears nothing of it, and the delivery record
// holds no "does not serve" drop for it. Before, the bus handed the notice
// to every configured channel, and each tenant's channel logged a WARN and
// counted a drop per outage, the counter operations.md says to alarm on.
func TestBusSelfNoticeGoesToTheDefaultTenantsChannels(t *testing.T) {
	t.Parallel()
	got := map[string]chan struct{}{"ops": make(chan struct{}, 10), "acme-hook": make(chan struct{}, 10)}
	cfg := config.Config{Channels: map[string]map[string]any{}}
	for name, c := range got {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			c <- struct{}{}
		}))
		t.Cleanup(srv.Close)
		cfg.Channels[name] = map[string]any{"type": "webhook", "url": srv.URL}
	}
	cfg.Channels["acme-hook"]["tenants"] = []any{"acme"}
	n, err := newSelfNotifier(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.disp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.send("alert", "no alert process is running")
	select {
	case <-got["ops"]:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the default tenant's channel heard nothing")
	}
	// The hook has the message; the lane records it once the answer is in.
	eventually(t, time.Minute, "the notice recorded as sent", func() bool {
		as := n.disp.Attempts(apollo.AttemptFilter{Channel: "ops"})
		return len(as) > 0 && as[0].Outcome == "sent"
	})
	n.disp.Stop(context.Background())
	for _, tenant := range []string{"", "acme"} {
		for _, a := range n.disp.Attempts(apollo.AttemptFilter{Tenant: tenant}) {
			if a.Channel != "ops" || a.Outcome != "sent" {
				t.Errorf("tenant %q: %s %s: %s", tenant, a.Channel, a.Outcome, a.Error)
			}
		}
	}
	if len(got["acme-hook"]) != 0 {
		t.Error("acme's channel heard of the bus's outage")
	}
}
