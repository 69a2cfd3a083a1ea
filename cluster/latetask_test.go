package cluster

import (
	"encoding/json"
	"testing"
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
	_, c, got := lateQuestions(t, lateCase{
		nodes: 1, name: "late-task-1",
		hold: func(o *Options, f func()) { o.testServeTaskHook = f },
		question: func(tenant string) (string, []byte) {
			data, _ := json.Marshal(rpcRequest{Op: "get", Tenant: tenant, TaskID: tenant + "-asked"})
			return rpcSubject(0), data
		},
		waiting: func(n *Node) int { return n.taskQuestionsWaiting(0) },
	})
	if r, err := decodeReply(got[0].Data); err != nil || r.Task == nil || r.Task.TaskID != "-asked" {
		t.Errorf("the first question was answered %+v, %v; want the default tenant's task", r, err)
	}
	if r, err := decodeReply(got[1].Data); err != nil || r.Task == nil || r.Task.TaskID != "globex-asked" || r.Task.Tenant != "globex" {
		t.Errorf("the question of the release before was answered %+v, %v; want globex's task", r, err)
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
	return k + l.questions.len()
}
