package cluster

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A burst of listings larger than the node's old queue of 256 (a stream
// hub's clients reconnecting at once each take a snapshot, a listing)
// while the node is busy: each question is stamped as it comes, however
// many wait, so every one whose asker has stopped waiting is skipped.
// Before, the node's queue held 256; the others waited unstamped in
// NATS's, were stamped only when they got into the node's, and were
// answered although their askers had answered 503 long before.
func TestABurstOfQuestionsIsStampedAsItComes(t *testing.T) {
	const burst = 296
	c := newTestCluster(t, 2, DefaultLeaseTTL)
	clock := &aheadClock{}
	busy, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n := c.startWith("burst-1", func(o *Options) {
		o.Clock = clock
		o.testServeAllHook = func() { once.Do(func() { close(busy); <-release }) }
	})
	c.waitServed(nil)
	now := time.Now().UnixMilli()
	tenants := []string{"acme", "globex"}
	for _, tenant := range tenants {
		publishAll(t, n, []apollo.Event{{TaskID: tenant + "-asked", Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant}})
	}
	nc := connect(t, c.srv)
	answers, err := nc.SubscribeSync("burst.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ask := func(name, tenant, within string) {
		t.Helper()
		data, _ := json.Marshal(rpcRequest{Op: "list", Filter: &listFilter{Tenant: tenant, Limit: 10}})
		askWithin(t, nc, rpcList, "burst."+name, data, within)
	}
	ask("first", "acme", "2000")
	select {
	case <-busy:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the node never began to answer the first question")
	}
	for i := range burst {
		ask(fmt.Sprintf("gone-%d", i), tenants[i%2], "2000")
	}
	// Every question has reached the node's queue, stamped. (Waiting also
	// for those that only reached NATS's queue of the subscription, as
	// this test once did when the node's queue held 256, let it move the
	// clock before the callback had stamped them: on a loaded machine none
	// was stamped yet, and none was late.)
	deadline := time.Now().Add(testwait.Timeout(t))
	for w := n.questionsWaiting(); w != burst; w = n.questionsWaiting() {
		if time.Now().After(deadline) {
			k, _, _ := n.listSub.Pending()
			t.Fatalf("%d of %d questions reached the node's queue, %d wait in NATS's", w, burst, k)
		}
		time.Sleep(time.Millisecond) // no signal: the queue is polled
	}
	clock.ahead.Add(int64(time.Minute)) // the busy answer took a minute
	close(release)
	ask("last", "globex", "") // of the release before: answered, after all the others
	var got []string
	for len(got) == 0 || got[len(got)-1] != "burst.last" {
		m, err := answers.NextMsg(testwait.Timeout(t))
		if err != nil {
			t.Fatalf("answers so far %v: %v", got, err)
		}
		got = append(got, m.Subject)
	}
	if len(got) != 2 || got[0] != "burst.first" {
		t.Errorf("the node answered %d questions: %v ... %v; want burst.first and burst.last, the %d past their asker's wait skipped", len(got), got[:min(len(got), 3)], got[len(got)-1], burst)
	}
	if k := n.NodeStats().LateQuestions; k != burst {
		t.Errorf("the node counts %d late questions, want %d", k, burst)
	}
}
