package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// gatedHook is a slow webhook receiver: it holds each request until the
// test lets one through (pass), or lets every one through once open is
// set, and hands the notification to C as it answers.
type gatedHook struct {
	*hook
	pass chan struct{}
	open atomic.Bool
}

func newGatedHook(t *testing.T) *gatedHook {
	g := &gatedHook{hook: &hook{C: make(chan webhook.ApolloPayload, 1000)}, pass: make(chan struct{})}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.ApolloPayload
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !g.open.Load() {
			select {
			case <-g.pass:
			case <-r.Context().Done(): // the sender was killed
				return
			}
		}
		g.C <- p
	}))
	t.Cleanup(func() { g.open.Store(true); g.srv.Close() })
	return g
}

// deliver lets one request through and returns its notification,
// skipping the self-alerts (apollo:...), which are no tenant's.
func (g *gatedHook) deliver(t *testing.T) webhook.ApolloPayload {
	t.Helper()
	for {
		select {
		case g.pass <- struct{}{}:
		case <-time.After(testwait.Timeout(t)):
			t.Fatal("the webhook was not called")
		}
		p := <-g.C
		if !strings.HasPrefix(p.Alert.Rule, "apollo:") {
			return p
		}
	}
}

// hookQueued is how many notifications the channel hook took, in either
// mode.
func (d *deployment) hookQueued() int64 {
	if d.three {
		return d.alertQueued()
	}
	var sys struct {
		Notifications struct {
			Channels map[string]struct{ Queued int64 }
		}
	}
	d.do("", "GET", "/api/v1/system", "", &sys, 200)
	return sys.Notifications.Channels["hook"].Queued
}

// One tenant's storm does not crowd another tenant out of a shared
// channel. Tenant acme's BY: name rule fires for each of 60 failing jobs
// to a slow webhook shared with tenant globex; globex's one failure,
// told after acme's 60 are queued, arrives after at most two of acme's
// (the one under way, and the one whose turn came first), not after all
// of them. Then the process that notifies is killed with SIGKILL while
// both tenants are still owed notifications: after the restart every one
// of acme's 60 and globex's second arrives. Before, the lane had one
// queue in arrival order: globex's waited behind all of acme's (and with
// a storm past queue_size, found it full and was dropped).
func TestOneTenantsStormDoesNotCrowdOutAnother(t *testing.T) {
	const storm = 60
	endToEnd(t)
	for _, three := range []bool{false, true} {
		name := "AllInOne"
		if three {
			name = "ThreeProcesses"
		}
		t.Run(name, func(t *testing.T) {
			g := newGatedHook(t)
			d := startDeployment(t, three, g.hook, deployOptions{hook: "    timeout: 5m\n", repeat: "1h"})

			d.do("acme", "PUT", "/api/v1/rules", `RULE acme_each task_prefix: "acme_job" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: hook`+"\n", nil, 200)
			d.do("globex", "PUT", "/api/v1/rules", `RULE globex_first task_prefix: "globex_a_" ON: failed NOTIFY: hook
RULE globex_second task_prefix: "globex_b_" ON: failed NOTIFY: hook
`, nil, 200)
			evs := make([]string, 0, 2*storm)
			for i := range storm {
				id := fmt.Sprintf("acme_job_%03d-1", i)
				start, end := d.runAt()
				evs = append(evs,
					fmt.Sprintf(`{"taskID":%q,"name":"acme_job_%03d","sequence":1,"status":"running","ts":%d}`, id, i, start),
					fmt.Sprintf(`{"taskID":%q,"sequence":2,"status":"failed","ts":%d}`, id, end))
			}
			d.do("acme", "POST", "/api/v1/events", "["+strings.Join(evs, ",")+"]", nil, 200)
			eventually(t, time.Minute, "acme's storm handed to the channel", func() bool { return d.hookQueued() >= storm })
			d.fail("globex", "globex_a_load")
			eventually(t, time.Minute, "globex's failure handed to the channel", func() bool { return d.hookQueued() >= storm+1 })

			told := map[string]int{} // acme's jobs told
			for before := 0; ; before++ {
				p := g.deliver(t)
				if p.Alert.Tenant == "globex" {
					if p.Alert.Rule != "globex_first" {
						t.Fatalf("globex's %s arrived before its first", p.Alert.Rule)
					}
					if before > 2 {
						t.Fatalf("globex's notification arrived after %d of acme's, want at most 2: one tenant's storm held up another's", before)
					}
					break
				}
				told[p.Alert.Group]++
			}
			for range 3 {
				p := g.deliver(t)
				if p.Alert.Tenant != "acme" {
					t.Fatalf("a notification of %q, rule %q: only acme's are owed", p.Alert.Tenant, p.Alert.Rule)
				}
				told[p.Alert.Group]++
			}
			d.fail("globex", "globex_b_load")
			eventually(t, time.Minute, "globex's second failure handed to the channel", func() bool { return d.hookQueued() >= storm+2 })

			// The engine saves that it told globex_first shortly after it
			// handed it over, on a goroutine of its own: a kill -9 before
			// that save has the restart decide it again from the log, and
			// tell it twice, as docs/architecture.md says (at least once).
			// This test failed so under load (the kill came 0.2 s after
			// the firing, during the save). An acknowledgement is saved
			// before it is answered, with the rest of the alert state:
			// after it, globex_first again is one notification too many.
			first := d.firingAlert("globex", "globex_first")
			d.do("globex", "POST", "/api/v1/alerts/"+first.ID+"/ack", "", nil, 200)
			// Open before the restart: a request of the new process held
			// at the gate would wait out its 5m timeout. The one the lane
			// is held on now ends only with the kill.
			g.open.Store(true)
			d.crash()
			second := false
			deadline := time.After(2 * testwait.Timeout(t))
			for len(told) < storm || !second {
				select {
				case p := <-g.C:
					switch {
					case strings.HasPrefix(p.Alert.Rule, "apollo:"):
					case p.Alert.Tenant == "globex" && p.Alert.Rule == "globex_second":
						second = true
					case p.Alert.Tenant == "acme" && p.Alert.Rule == "acme_each":
						told[p.Alert.Group]++
					default:
						t.Fatalf("after the restart, a %s notification of %q, rule %q", p.Kind, p.Alert.Tenant, p.Alert.Rule)
					}
				case <-deadline:
					t.Fatalf("after kill -9 and a restart, %d of acme's %d jobs told, globex's second told: %v", len(told), storm, second)
				}
			}
		})
	}
}

// A channel shared by tenants holds at most queue_total of their
// notifications together, and past it the tenant with the longest queue
// overflows, never one with a short queue. Tenant acme's storm of 10 to a
// slow webhook (queue_size 4, queue_total 6) fills its own queue; then
// globex's 3 are all kept, and acme's newest is dropped for the third,
// recorded in acme's delivery record as "channel queue full" and counted
// in the channel's dropped; globex's record has no drop. Every one kept
// arrives once the webhook answers. Before, queue_total did not exist:
// each tenant held queue_size, with nothing bounding the channel.
func TestChannelQueueTotalOverflowsTheLongestTenantFirst(t *testing.T) {
	const storm = 10
	endToEnd(t)
	g := newGatedHook(t)
	d := startDeployment(t, false, g.hook, deployOptions{hook: "    timeout: 5m\n    queue_size: 4\n    queue_total: 6\n", repeat: "1h"})
	for _, tenant := range tenants {
		d.do(tenant, "PUT", "/api/v1/rules", fmt.Sprintf(`RULE %[1]s_each task_prefix: "%[1]s_job" BY: name WINDOW: 5m THRESHOLD: failed >= 1 NOTIFY: hook`+"\n", tenant), nil, 200)
	}
	d.stormEach("acme", storm)
	stats := func() (queued, dropped int64) {
		var sys struct {
			Notifications struct {
				Channels map[string]struct{ Queued, Dropped int64 }
			}
		}
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		ch := sys.Notifications.Channels["hook"]
		return ch.Queued, ch.Dropped
	}
	// One under way at the gate, 4 queued, 5 past acme's queue_size.
	eventually(t, time.Minute, "acme's storm handed to the channel", func() bool { q, dr := stats(); return q+dr >= storm })
	d.stormEach("globex", 3)
	eventually(t, time.Minute, "globex's handed to the channel", func() bool { q, dr := stats(); return q+dr >= storm+3 })
	if q, dr := stats(); q != 5+3 || dr != 5+1 {
		t.Fatalf("queued %d, dropped %d; want 8 (acme's 5, globex's 3) and 6 (acme's 5 past its queue, 1 for the channel's total)", q, dr)
	}
	drops := func(tenant string) map[string]int {
		var list apiclient.AttemptList
		d.do(tenant, "GET", "/api/v1/notifications?channel=hook&limit=100", "", &list, 200)
		why := map[string]int{}
		for _, a := range list.Attempts {
			if a.Outcome == "dropped" {
				why[a.Error]++
			}
		}
		return why
	}
	if got := drops("acme"); got["queue full"] != 5 || got["channel queue full: the longest tenant queue overflows first"] != 1 {
		t.Fatalf("acme's drops: %v", got)
	}
	if got := drops("globex"); len(got) != 0 {
		t.Fatalf("globex's drops: %v: a short queue lost one for another's storm", got)
	}
	got := map[string]int{}
	for range 4 + 3 {
		got[g.deliver(t).Alert.Tenant]++
	}
	if got["globex"] != 3 || got["acme"] != 4 {
		t.Fatalf("delivered %v, want globex's 3 and acme's 4 (one under way, 3 queued)", got)
	}
}
