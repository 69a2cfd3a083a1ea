package cluster

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
)

// newerTask is a task as a node of a newer build writes it in an answer:
// its history has a record of a kind ("paused") and one of a status
// ("skipped") this build has no name for, between two it knows; with
// newerStatus the task's own status is "skipped" too.
func newerTask(t testing.TB, tenant, id string, created int64, newerStatus bool) json.RawMessage {
	t.Helper()
	rec := func(seq int64, st apollo.Status, k apollo.Kind) apollo.Record {
		return apollo.Record{Event: apollo.Event{TaskID: id, Name: "etl", Sequence: seq, Status: st, Ts: created + seq}, Kind: k, ReceivedAt: created + seq}
	}
	st := apollo.StatusRunning
	if newerStatus {
		st = apollo.StatusManualBlocked
	}
	b, err := json.Marshal(apollo.Task{TaskID: id, Name: "etl", Tenant: tenant, Status: st, Sequence: 4, CreatedAt: created, UpdatedAt: created + 4,
		History: []apollo.Record{rec(1, apollo.StatusPending, apollo.KindReport), rec(2, apollo.StatusRunning, apollo.KindFlapping),
			rec(3, apollo.StatusManualBlocked, apollo.KindCorrection), rec(4, apollo.StatusRunning, apollo.KindReport)}})
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"kind":"flapping"`), []byte(`"kind":"paused"`), 1)
	return bytes.ReplaceAll(b, []byte(`"status":"manual_blocked"`), []byte(`"status":"skipped"`))
}

// Nodes of two builds in one cluster, in a rolling upgrade: a node reads
// the answers of a newer owner, whose tasks (of two tenants) have
// history entries of a kind and a status this node has no name for. The
// task is shown without those entries, alone passed over, and a warning
// says a newer node answered; a listing shows the tasks, passing over one
// whose own status it cannot name; a read of that task alone answers 503
// with what to do. Before, the whole answer failed: the task read and the
// listing through this node failed with an internal error.
func TestAnswerOfANewerNodeIsReadAsFarAsItCanBe(t *testing.T) {
	s := runNATS(t)
	nc, newer := connect(t, s), connect(t, s)
	logs := &syncBuffer{}
	n, err := New(Options{Conn: nc, NodeID: "old-1", Partitions: 1, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	const created = 1_764_547_200_000
	tasks := map[string]json.RawMessage{
		"acme/t-1": newerTask(t, "acme", "t-1", created, false),
		"beta/t-1": newerTask(t, "beta", "t-1", created+1, false),
		"beta/n-1": newerTask(t, "beta", "n-1", created+2, true),
	}
	answer := func(m *nats.Msg, reply string) {
		if err := m.Respond([]byte(reply)); err != nil {
			t.Error(err)
		}
	}
	if _, err := newer.Subscribe(rpcSubject(0), func(m *nats.Msg) { // the newer owner of partition 0
		var req rpcRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Op != "get" {
			t.Errorf("asked %s", m.Data)
		}
		answer(m, `{"task":`+string(tasks[req.Tenant+"/"+req.TaskID])+`}`)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := newer.Subscribe(rpcList, func(m *nats.Msg) {
		answer(m, `{"tasks":[`+string(tasks["beta/n-1"])+`,`+string(tasks["beta/t-1"])+`,`+string(tasks["acme/t-1"])+`],"partitions":[0]}`)
	}); err != nil {
		t.Fatal(err)
	}
	if err := newer.Flush(); err != nil {
		t.Fatal(err)
	}

	for _, tenant := range []string{"acme", "beta"} {
		task, err := n.Get(tenant, "t-1")
		if err != nil {
			t.Fatalf("tenant %s: %v", tenant, err)
		}
		var seqs []int64
		for _, h := range task.History {
			seqs = append(seqs, h.Sequence)
		}
		if task.Tenant != tenant || task.Status != apollo.StatusRunning || len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 4 {
			t.Fatalf("tenant %s: task %+v with history %v; want it running, with the entries 1 and 4 (2 and 3 passed over)", tenant, task, seqs)
		}
	}
	page, _, err := n.List(apollo.TaskFilter{})
	if err != nil || len(page) != 2 || page[0].Tenant != "beta" || page[1].Tenant != "acme" || len(page[0].History) != 2 {
		t.Fatalf("listing %+v, %v; want beta's t-1 then acme's, n-1 passed over", page, err)
	}
	_, err = n.Get("beta", "n-1")
	if apollo.ErrorCode(err) != apollo.EUNAVAILABLE || !strings.Contains(err.Error(), `"skipped"`) {
		t.Fatalf("the task of a newer status read alone: %v; want unavailable, naming its status", err)
	}
	if s := logs.String(); !strings.Contains(s, "passed over, the rest shown: a node of a newer build answered") {
		t.Fatalf("no warning of what was passed over in the log:\n%s", s)
	}
}
