package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/internal/testwait"
)

// Events put on the events subjects by someone else than a node, with an
// extra the HTTP API refuses (not JSON, not an object, not UTF-8), in a
// batch and alone, for two tenants with the same task IDs: the owner
// drops each of them alone, counts it invalid and says so, and applies
// the events around them. Every task stays readable through another node.
// Before, the owner applied them: the task's answer between nodes could
// not be encoded, and the task was unreadable through any other node
// (500, "unexpected end of JSON input") for as long as it was kept.
func TestExtraPutOnTheSubjectsIsCheckedAsTheAPIChecksIt(t *testing.T) {
	c := newTestCluster(t, 1, 10*time.Second)
	logs := &syncBuffer{}
	owner := c.startWith("extra-1", func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	c.waitServed(nil)
	other := c.startWith("extra-2", func(o *Options) { o.testNoClaim = true })
	changes := recordChanges(t, connect(t, c.srv))
	js, err := jetstream.New(connect(t, c.srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testwait.Context(t)
	const ts = 1_764_547_200_000
	ev := func(id, extra string) apollo.Event {
		return apollo.Event{TaskID: id, Name: "etl", Sequence: 1, Status: apollo.StatusRunning, Ts: ts, Extra: []byte(extra)}
	}
	bad := map[string]string{"b-notjson": `{"a":`, "b-array": `[1,2]`, "b-string": `"s"`, "b-utf8": "{\"s\":\"\xff\"}"}
	single := map[string]string{"s-array": `[1]`, "s-number": `5`, "s-utf8": "{\"s\":\"\xfe\"}"}
	tenants := []string{"", "acme"}
	for _, tenant := range tenants {
		evs := []apollo.Event{ev("first", `{"n":1}`)}
		for id, x := range bad {
			evs = append(evs, ev(id, x))
		}
		evs = append(evs, ev("after", `{"n":2}`))
		if _, err := js.Publish(ctx, EventSubject(tenant, 0), batchOf(evs...)); err != nil {
			t.Fatal(err)
		}
		for id, x := range single {
			m := nats.NewMsg(EventSubject(tenant, 0))
			m.Data = []byte(fmt.Sprintf(`{"taskID":%q,"sequence":1,"status":"running","ts":%d,"extra":%s}`, id, ts, x))
			if _, err := js.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		m := nats.NewMsg(EventSubject(tenant, 0))
		m.Data = []byte(fmt.Sprintf(`{"taskID":"s-null","sequence":1,"status":"running","ts":%d,"extra":null}`, ts))
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	waitChanges(t, changes, "s-null", 1, len(tenants)) // the last of each tenant: everything before is decided
	for _, tenant := range tenants {
		for id, x := range map[string]string{"first": `{"n":1}`, "after": `{"n":2}`, "s-null": ""} {
			task, err := other.Get(tenant, id)
			if err != nil || len(task.History) != 1 || string(task.History[0].Extra) != x {
				t.Errorf("tenant %q: task %s through the other node: %+v, %v; want its extra %q", tenant, id, task, err, x)
			}
		}
		for id := range bad {
			if task, err := other.Get(tenant, id); apollo.ErrorCode(err) != apollo.ENOTFOUND {
				t.Errorf("tenant %q: task %s, of an extra the API refuses, through the other node: %+v, %v; want not found", tenant, id, task, err)
			}
		}
		for id := range single {
			if task, err := other.Get(tenant, id); apollo.ErrorCode(err) != apollo.ENOTFOUND {
				t.Errorf("tenant %q: task %s, of an extra the API refuses, through the other node: %+v, %v; want not found", tenant, id, task, err)
			}
		}
	}
	for id := range bad {
		resp, err := http.Get(other.http.URL + "/api/v1/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET task %s through the other node's API: %d, want 404", id, resp.StatusCode)
		}
	}
	want := int64(len(tenants) * (len(bad) + len(single)))
	if st := owner.NodeStats().Partitions[0]; st.Invalid != want {
		b, _ := json.Marshal(st)
		t.Errorf("partition stats %s: want %d invalid", b, want)
	}
	if s := logs.String(); strings.Count(s, "event dropped: not a valid event") == 0 || !strings.Contains(s, "extra") {
		t.Errorf("no warning of the events dropped for their extra:\n%s", s)
	}
}
