package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
)

// awaitAlertsSaved waits until DATA/alerts.json holds an alert of each
// rule and owes no notification: a kill -9 from then on restarts with
// those alerts told, and the notifications only in the outbox.
func (d *deployment) awaitAlertsSaved(rules ...string) {
	d.t.Helper()
	eventually(d.t, 30*time.Second, fmt.Sprintf("the alerts of %v saved, none owed by the engine", rules), func() bool {
		b, _ := os.ReadFile(filepath.Join(d.dir, "data", "alerts.json"))
		if bytes.Contains(b, []byte(`"owed"`)) {
			return false
		}
		for _, rule := range rules {
			if !strings.Contains(string(b), `"rule":"`+rule+`"`) && !strings.Contains(string(b), `"rule": "`+rule+`"`) {
				return false
			}
		}
		return true
	})
}

// What a process that stopped owed takes room in its tenant's queue,
// and only in its own tenant's. With queue_size 2 and the webhook down,
// acme's first failure is retried and two more wait; the server is
// killed with SIGKILL and restarts with the webhook still down: it sends
// the three again, one retried and two waiting. Two more failures of
// acme's then find acme's queue full and are dropped, visibly; globex's
// failure is queued, whatever acme owes. After a second kill the outbox
// owes four (acme's three, globex's one), and the restart, with the
// webhook back, sends each of them once. Before, what was owed counted
// in no bound: the restarted lane queued acme's two new ones besides the
// two it owed (queueLen 5 with globex's, past queue_size), and each
// restart during an outage added a full queue to what the next one owed.
func TestOwedCountsInItsTenantsQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	t.Parallel()
	h, down, refused := downHook(t)
	d := newDeployment(t, false, h, deployOptions{hook: "    queue_size: 2\n"})
	d.start()
	t.Cleanup(d.logOnFailure)

	type hookStats struct {
		Queued, Dropped int64
		QueueLen        int
	}
	stats := func() hookStats {
		var sys struct {
			Notifications struct{ Channels map[string]hookStats }
		}
		d.do("", "GET", "/api/v1/system", "", &sys, 200)
		return sys.Notifications.Channels["hook"]
	}
	var acme strings.Builder
	for _, r := range []string{"a", "b", "c", "d", "e"} {
		fmt.Fprintf(&acme, "RULE acme_%[1]s task_prefix: \"acme_%[1]s\" ON: failed NOTIFY: hook\n", r)
	}
	d.do("acme", "PUT", "/api/v1/rules", acme.String(), nil, 200)
	d.do("globex", "PUT", "/api/v1/rules", "RULE globex_a task_prefix: \"globex_a\" ON: failed NOTIFY: hook\n", nil, 200)

	d.fail("acme", "acme_a")
	select { // the lane retries it from now on
	case <-refused:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the webhook was never called")
	}
	d.fail("acme", "acme_b")
	d.fail("acme", "acme_c")
	eventually(t, time.Minute, "acme's three handed to the channel", func() bool { return stats().Queued == 3 })
	d.awaitAlertsSaved("acme_a", "acme_b", "acme_c")
	d.api.kill()

	d.start() // the webhook is still down
	eventually(t, time.Minute, "the three owed queued again, one retried", func() bool {
		s := stats()
		return s.Queued == 3 && s.QueueLen == 2
	})
	d.fail("acme", "acme_d")
	d.fail("acme", "acme_e")
	d.fail("globex", "globex_a")
	eventually(t, time.Minute, "the three new failures handed to the channel", func() bool {
		s := stats()
		return s.Queued+s.Dropped == 6
	})
	if s := stats(); s.QueueLen != 3 || s.Dropped != 2 {
		t.Fatalf("queueLen %d, dropped %d after the restart; want 3 and 2: acme's two owed fill its queue of 2, its two new ones are dropped, globex's waits",
			s.QueueLen, s.Dropped)
	}
	var l struct{ Attempts []apollo.Attempt }
	d.do("acme", "GET", "/api/v1/notifications", "", &l, 200)
	dropped := map[string]bool{}
	for _, a := range l.Attempts {
		if a.Outcome == "dropped" && a.Error == "queue full" {
			dropped[a.DedupKey] = true
		}
	}
	if len(dropped) != 2 {
		t.Errorf("acme's record: %+v, want its two new notifications dropped: queue full", l.Attempts)
	}
	d.awaitAlertsSaved("acme_d", "acme_e", "globex_a")
	if owed := d.owedNow(); owed != 4 {
		t.Fatalf("the outbox owes %d, want 4: acme's three and globex's one", owed)
	}
	d.api.kill()
	down.Store(false)
	d.start()
	got := map[string]int{}
	for range 4 {
		p := h.await(t, 30*time.Second, "the owed notifications", func(p webhook.ApolloPayload) bool { return p.Kind != apollo.NotifySelf })
		got[p.Alert.Tenant+"/"+p.Alert.Rule]++
	}
	want := map[string]int{"acme/acme_a": 1, "acme/acme_b": 1, "acme/acme_c": 1, "globex/globex_a": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after the second restart: %v, want %v", got, want)
	}
	eventually(t, time.Minute, "the outbox emptied", func() bool { return d.owedNow() == 0 })
}
