package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/internal/testwait"
)

// taskInPartition is a task ID that falls in partition p of parts.
func taskInPartition(prefix string, p, parts int) string {
	for i := 0; ; i++ {
		id := prefix + strconv.Itoa(i)
		if cluster.Partition(id, parts) == p {
			return id
		}
	}
}

// A partition whose decision log holds a message the node cannot read
// (written by an owner of a newer build, or damaged) is given up and
// claimed again less and less often: the second claim two renewal
// intervals after the first, the third four, and its lease is free in
// between for any other node. The node logs the episode once, with what
// to do, shows it in GET /api/v1/system (cluster.open_failures), is ready
// with its other partition, which serves both tenants, and rebuilds the
// partition by itself once the message is removed: the events accepted
// meanwhile apply. Before, the lease's deletion woke the keeper, which
// claimed the partition again at once, failed again, and logged an ERROR
// line each time: a hot loop and a flood of the log.
func TestBusNodePartitionThatCannotBeRebuiltIsRetriedLessAndLess(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for three claims, 6 s at the default lease TTL")
	}
	t.Parallel()
	ns := startNATS(t)
	url := ns.ClientURL()
	start, tokens := busNodesWithTenants(t, url, 2)
	first := start("mend-1")
	servedWhenReady(t, first.addr)
	ids := [2]string{taskInPartition("mend-", 0, 2), taskInPartition("mend-", 1, 2)}
	ts := time.Now().UnixMilli()
	event := func(id string, seq int, status string) string {
		return fmt.Sprintf(`{"taskID":%q,"name":"nightly","sequence":%d,"status":%q,"ts":%d}`, id, seq, status, ts+int64(seq))
	}
	for _, tenant := range tenants {
		for _, id := range ids {
			if got := postAs(t, first.addr, tokens[tenant], event(id, 1, "running")); !strings.Contains(got, `"accepted":1`) {
				t.Fatalf("tenant %s, task %s: %s", tenant, id, got)
			}
		}
	}
	first.term(t)

	// What an owner of a newer build could append: the fence header right,
	// a record this build cannot decode.
	js := jetStreamOf(t, url)
	ctx := testwait.Context(t)
	logs, err := js.Stream(ctx, cluster.LogStream)
	if err != nil {
		t.Fatal(err)
	}
	last, err := logs.GetLastMsgForSubject(ctx, "apollo.log.0")
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg("apollo.log.0")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(last.Sequence, 10))
	m.Data = []byte{3, 0xff, 0xfe, 0xfd}
	bad, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cluster.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "p.0", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	again := start("mend-1")
	var claims []time.Time
	freed := 0
	for len(claims) < 3 {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			if e.Operation() == jetstream.KeyValuePut {
				claims = append(claims, e.Created()) // the server's time: read late, the updates come at once
			} else if len(claims) > 0 {
				freed++
			}
		case <-ctx.Done():
			t.Fatalf("%d claims of partition 0 seen", len(claims))
		}
	}
	renew := cluster.DefaultLeaseTTL / 5
	if gap := claims[1].Sub(claims[0]); gap < renew*9/10 {
		t.Errorf("partition 0 claimed again %v after a failed rebuild, want at least a renewal interval (%v)", gap, renew)
	}
	if gap := claims[2].Sub(claims[1]); gap < 2*renew*9/10 {
		t.Errorf("partition 0 claimed a third time %v after the second, want at least two renewal intervals (%v)", gap, 2*renew)
	}
	if freed < 2 {
		t.Errorf("the lease of partition 0 was given up %d times between 3 claims: other nodes could not claim it", freed)
	}

	var sys struct {
		Cluster struct {
			OpenFailures []struct {
				Partition, Attempts int
				Error               string
			} `json:"open_failures"`
		} `json:"cluster"`
	}
	code, body := request(t, again.addr, tokens[""], "GET", "/api/v1/system")
	if code != 200 || json.Unmarshal([]byte(body), &sys) != nil {
		t.Fatalf("GET /api/v1/system: %d %s", code, body)
	}
	if f := sys.Cluster.OpenFailures; len(f) != 1 || f[0].Partition != 0 || f[0].Attempts < 2 ||
		!strings.Contains(f[0].Error, fmt.Sprintf("message %d", bad.Sequence)) {
		t.Errorf("cluster.open_failures: %+v; want partition 0, 2 attempts or more, the error naming message %d", f, bad.Sequence)
	}
	resp, err := http.Get("http://" + again.addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /readyz: %d, want 200: the node serves what it can", resp.StatusCode)
	}
	for _, tenant := range tenants {
		for _, id := range ids {
			if got := postAs(t, again.addr, tokens[tenant], event(id, 2, "success")); !strings.Contains(got, `"accepted":1`) {
				t.Fatalf("tenant %s, task %s: %s", tenant, id, got)
			}
		}
	}
	readBack := func(tenant, id string) {
		t.Helper()
		var task struct {
			Tenant, Status string
			Sequence       int
			History        []struct{ Sequence int }
		}
		eventually(t, testwait.Timeout(t), "task "+id+" of tenant "+tenant+" read back", func() bool {
			code, body := request(t, again.addr, tokens[tenant], "GET", "/api/v1/tasks/"+id)
			return code == 200 && json.Unmarshal([]byte(body), &task) == nil && task.Sequence == 2
		})
		if task.Tenant != tenant || task.Status != "success" || len(task.History) != 2 {
			t.Errorf("tenant %s, task %s: %+v", tenant, id, task)
		}
	}
	for _, tenant := range tenants {
		readBack(tenant, ids[1]) // the other partition serves meanwhile
	}

	// The mend: the message removed (nats stream rmm), the node rebuilds
	// the partition at its next claim, and what it accepted applies.
	if err := logs.DeleteMsg(ctx, bad.Sequence); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range tenants {
		readBack(tenant, ids[0])
	}
	again.kill()
	out := again.out.String()
	if n := strings.Count(out, "a partition cannot be rebuilt on this node"); n != 1 {
		t.Errorf("the failed rebuilds were logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "a partition that could not be rebuilt was rebuilt") {
		t.Errorf("no word of the partition rebuilt at last:\n%s", out)
	}
}
