package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// A notification the server owed when it died is sent after the restart:
// each tenant's failure is told while the webhook is down (the lane
// retries it), the server is killed with SIGKILL, the webhook comes back,
// and the restarted server delivers both. Before, the lanes' queues lived
// in memory only: the alert engine had saved the alerts as told, so nobody
// ever heard of those failures, and nothing recorded that they were lost.
func TestOwedNotificationsSurviveKill(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	refused := make(chan string, 100) // the tenant of each refused notification
	h := &hook{C: make(chan webhook.ApolloPayload, 100)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.ApolloPayload
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if down.Load() {
			refused <- p.Alert.Tenant
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		h.C <- p
	}))
	t.Cleanup(h.srv.Close)
	d := newDeployment(t, false, h, deployOptions{})
	d.start()
	t.Cleanup(d.logOnFailure)

	want := map[string]string{}
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf("RULE %[1]s_failed task_prefix: \"%[1]s_\" ON: failed NOTIFY: hook\n", tenant), nil, 200)
		d.fail(tenant, tenant+"_load")
		want[tenant] = tenant + "_failed"
	}
	// The lane retries the first refused message while the other waits in
	// its queue: both are owed once the webhook refused one and the
	// channel took two.
	select {
	case <-refused:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the webhook was never called")
	}
	eventually(t, time.Minute, "both notifications handed to the channel", func() bool {
		var sys struct {
			Notifications struct {
				Channels map[string]struct{ Queued int }
			}
		}
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Notifications.Channels["hook"].Queued >= 2
	})
	d.api.kill()
	down.Store(false)
	d.start()
	awaitTenants(t, h, "firing", want)
	for _, tenant := range tenants {
		var l struct{ Attempts []apollo.Attempt }
		d.do(tenant, "GET", "/api/v1/notifications", "", &l, 200)
		if len(l.Attempts) == 0 || l.Attempts[0].Outcome != "sent" || l.Attempts[0].Tenant != tenant {
			t.Errorf("tenant %s: the delivery record after the restart: %+v", tenant, l.Attempts)
		}
	}
}
