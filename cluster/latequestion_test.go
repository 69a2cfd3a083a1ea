package cluster

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// aheadClock is the system clock, moved ahead by what the test adds.
type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time                          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *aheadClock) NewTimer(d time.Duration) apollo.Timer   { return apollo.SystemClock.NewTimer(d) }
func (c *aheadClock) NewTicker(d time.Duration) apollo.Ticker { return apollo.SystemClock.NewTicker(d) }

// A node answers questions to every node one at a time. One that waited
// behind a slow answer past the time its asker waits (the header
// Apollo-Within) is skipped: its asker has given up (503), and answering
// it would only keep the node from the questions after it. A question of
// the release before, which carries no Apollo-Within, is answered however
// long it waited, as before. Before, every question was answered, however
// long ago its asker gave up.
func TestAQuestionPastItsAskersWaitIsSkipped(t *testing.T) {
	n, _, got := lateQuestions(t, lateCase{
		nodes: 2, name: "late-1",
		hold: func(o *Options, f func()) { o.testServeAllHook = f },
		question: func(tenant string) (string, []byte) {
			data, _ := json.Marshal(rpcRequest{Op: "list", Filter: &listFilter{Tenant: tenant, Limit: 10}})
			return rpcList, data
		},
		waiting: func(n *Node) int { return n.questionsWaiting() },
	})
	if r, err := decodeReply(got[len(got)-1].Data); err != nil || len(r.Tasks) != 1 || r.Tasks[0].TaskID != "globex-asked" {
		t.Errorf("the question of the release before was answered %+v, %v; want globex's task", r, err)
	}
	for _, tenant := range []string{"", "globex"} { // a listing asked now is answered
		tasks, _, err := n.List(apollo.TaskFilter{Tenant: tenant})
		if err != nil || len(tasks) != 1 || tasks[0].TaskID != tenant+"-asked" {
			t.Errorf("%q's listing after: %+v, %v", tenant, tasks, err)
		}
	}
}

// lateCase is what differs between the kinds of question lateQuestions
// plays: the node's hold, the question asked and the queue it waits in.
type lateCase struct {
	nodes    int
	name     string
	hold     func(o *Options, f func()) // installs f where the node answers
	question func(tenant string) (subject string, data []byte)
	waiting  func(n *Node) int // questions waiting on the node
}

// lateQuestions plays the scenario of the tests of skipped questions, for
// two tenants: each has a task; the node is held busy on a first question
// while three more wait behind it, two past their asker's wait (of two
// tenants) and one of the release before (no Apollo-Within); the busy
// answer takes a minute by the node's clock. It checks that the node
// answered the first and the release before's, skipped the other two and
// counted them, and returns the node and the answers, the release
// before's last.
func lateQuestions(t *testing.T, lc lateCase) (*testNode, *testCluster, []*nats.Msg) {
	t.Helper()
	c := newTestCluster(t, lc.nodes, 3*time.Second)
	clock := &aheadClock{}
	busy, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n := c.startWith(lc.name, func(o *Options) {
		o.Clock = clock
		lc.hold(o, func() { once.Do(func() { close(busy); <-release }) })
	})
	c.waitServed(nil)
	now := time.Now().UnixMilli()
	for _, tenant := range []string{"", "globex"} {
		publishAll(t, n, []apollo.Event{{TaskID: tenant + "-asked", Sequence: 1, Status: apollo.StatusRunning, Ts: now, Tenant: tenant}})
	}
	nc := connect(t, c.srv)
	answers, err := nc.SubscribeSync("late.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ask := func(name, tenant, within string) {
		t.Helper()
		subject, data := lc.question(tenant)
		askWithin(t, nc, subject, "late."+name, data, within)
	}
	ask("first", "", "2000")
	select {
	case <-busy:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the node never began to answer the first question")
	}
	ask("gone", "", "2000")
	ask("gone-globex", "globex", "2000")
	ask("release-before", "globex", "")
	deadline := time.Now().Add(testwait.Timeout(t))
	for lc.waiting(n.Node) < 3 { // no signal: the node's own queue is polled
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 questions reached the node", lc.waiting(n.Node))
		}
		time.Sleep(time.Millisecond)
	}
	clock.ahead.Add(int64(time.Minute)) // the busy answer took a minute
	close(release)
	var got []*nats.Msg
	for len(got) == 0 || got[len(got)-1].Subject != "late.release-before" {
		m, err := answers.NextMsg(testwait.Timeout(t))
		if err != nil {
			t.Fatalf("answers so far %d: %v", len(got), err)
		}
		got = append(got, m)
	}
	if len(got) != 2 || got[0].Subject != "late.first" {
		var subjects []string
		for _, m := range got {
			subjects = append(subjects, m.Subject)
		}
		t.Fatalf("the node answered %v; want late.first and late.release-before, the two questions past their asker's wait skipped", subjects)
	}
	if k := n.NodeStats().LateQuestions; k != 2 {
		t.Errorf("the node counts %d late questions, want 2", k)
	}
	return n, c, got
}

// questionsWaiting is how many questions to every node wait, stamped, in
// the node's queue.
func (n *Node) questionsWaiting() int { return n.questions.len() }

// askWithin publishes a question on subject, answered to reply, that says
// its asker waits within (Apollo-Within; "" for a question of a release
// before it).
func askWithin(t *testing.T, nc *nats.Conn, subject, reply string, data []byte, within string) {
	t.Helper()
	m := &nats.Msg{Subject: subject, Reply: reply, Data: data, Header: nats.Header{}}
	if within != "" {
		m.Header.Set(withinHeader, within)
	}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}
