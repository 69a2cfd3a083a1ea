package cluster

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// A partition's owner answers questions about its tasks (a task read, a
// nameless event's job, a correction) one at a time. One that waited
// behind a slow answer past the time its asker waits (the header
// Apollo-Within) is skipped, as a question to every node is: its asker
// has answered 503, and answering it would only delay the fresh ones. A
// question of the release before, which carries no Apollo-Within, is
// answered however long it waited. Before, every question was answered,
// however long ago its asker gave up.
func TestATaskQuestionPastItsAskersWaitIsSkipped(t *testing.T) {
	c := newTestCluster(t, 1, 3*time.Second)
	clock := &aheadClock{}
	busy, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	n := c.startWith("late-task-1", func(o *Options) {
		o.Clock = clock
		o.testServeTaskHook = func() { once.Do(func() { close(busy); <-release }) }
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
		data, _ := json.Marshal(rpcRequest{Op: "get", Tenant: tenant, TaskID: tenant + "-asked"})
		m := &nats.Msg{Subject: rpcSubject(0), Reply: "late." + name, Data: data, Header: nats.Header{}}
		if within != "" {
			m.Header.Set(withinHeader, within)
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
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
	for n.taskQuestionsWaiting(0) < 3 { // no signal: the node's queues are polled
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 questions reached the node", n.taskQuestionsWaiting(0))
		}
		time.Sleep(time.Millisecond)
	}
	clock.ahead.Add(int64(time.Minute)) // the busy answer took a minute
	close(release)
	var got []string
	for len(got) == 0 || got[len(got)-1] != "late.release-before" {
		m, err := answers.NextMsg(testwait.Timeout(t))
		if err != nil {
			t.Fatalf("answers so far %v: %v", got, err)
		}
		got = append(got, m.Subject)
		r, err := decodeReply(m.Data)
		switch m.Subject {
		case "late.first":
			if err != nil || r.Task == nil || r.Task.TaskID != "-asked" {
				t.Errorf("the first question was answered %+v, %v; want the default tenant's task", r, err)
			}
		case "late.release-before":
			if err != nil || r.Task == nil || r.Task.TaskID != "globex-asked" || r.Task.Tenant != "globex" {
				t.Errorf("the question of the release before was answered %+v, %v; want globex's task", r, err)
			}
		}
	}
	if len(got) != 2 || got[0] != "late.first" {
		t.Errorf("the node answered %v; want late.first and late.release-before, the two questions past their asker's wait skipped", got)
	}
	if k := n.NodeStats().LateQuestions; k != 2 {
		t.Errorf("the node counts %d late questions, want 2", k)
	}
	other := c.start("late-task-2")                 // asks the owner, with the header
	for _, tenant := range []string{"", "globex"} { // a question asked now is answered
		task, err := other.Get(tenant, tenant+"-asked")
		if err != nil || task.TaskID != tenant+"-asked" || task.Tenant != tenant {
			t.Errorf("%q's task after: %+v, %v", tenant, task, err)
		}
	}
}

// taskQuestionsWaiting is how many questions about partition p's tasks
// wait on its owner: stamped in the node's queue, or in NATS's queue of
// the subscription.
func (n *Node) taskQuestionsWaiting(p int) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.leases[p]
	if l == nil || l.sub == nil {
		return 0
	}
	k, _, _ := l.sub.Pending()
	return k + len(l.questions)
}
