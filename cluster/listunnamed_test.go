package cluster

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
)

// newerOwner answers listings on apollo.rpc.list for partition p as a node
// of a newer build would: tasks is each tenant's, in listing order, some
// of a status this build cannot name (newerTask). It honours the limit
// and the cursor as a partition's bus does, and says whether more follow.
func newerOwner(t *testing.T, nc *nats.Conn, p int, tasks map[string][]json.RawMessage) {
	t.Helper()
	type key struct {
		at int64
		id string
	}
	keyOf := func(raw json.RawMessage) key {
		var k struct {
			TaskID    string `json:"taskID"`
			CreatedAt int64  `json:"createdAt"`
		}
		if err := json.Unmarshal(raw, &k); err != nil {
			t.Fatal(err)
		}
		return key{k.CreatedAt, k.TaskID}
	}
	before := func(a, b key) bool { return a.at > b.at || a.at == b.at && a.id > b.id } // listing order
	if _, err := nc.Subscribe(rpcList, func(m *nats.Msg) {
		var req rpcRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Op != "list" || req.Filter == nil {
			t.Errorf("asked %s", m.Data)
			return
		}
		list := tasks[req.Filter.Tenant]
		if c := req.Filter.Cursor; c != "" {
			raw, _ := base64.RawURLEncoding.DecodeString(c)
			at, id, _ := strings.Cut(string(raw), ":")
			from := key{id: id}
			from.at, _ = strconv.ParseInt(at, 10, 64)
			list = slices.DeleteFunc(slices.Clone(list), func(r json.RawMessage) bool { return !before(from, keyOf(r)) })
		}
		page := list[:min(len(list), req.Filter.Limit)]
		var b strings.Builder
		b.WriteString(`{"tasks":[`)
		for i, r := range page {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(r)
		}
		fmt.Fprintf(&b, `],"partitions":[%d],"more":%t}`, p, len(list) > len(page))
		if err := m.Respond([]byte(b.String())); err != nil {
			t.Error(err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// A client paging with the cursor through a node, in a rolling upgrade
// where the owners are of a newer build and some tasks have a status this
// node cannot name, gets full pages (the limit, whenever more tasks
// follow) and every task it can name, once, in order; the last page has
// no cursor. Two tenants, tasks on two owners. Before, the node merged
// the owners' answers as if the tasks it left out were not there:
// acme's first page held 2 tasks of the 3 asked, without a cursor (the
// listing looked ended, 6 tasks never shown), and beta's first page went
// on with the other owner's tasks past b-5, which its owner's answer had
// no room for: the cursor skipped it.
func TestPagesAreFullAroundTasksThisNodeCannotName(t *testing.T) {
	s := runNATS(t)
	n, err := New(Options{Conn: connect(t, s), NodeID: "old-1", Partitions: 2, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// acme's tasks are all on one owner, two of its first four unnamed;
	// beta's first three after b-9 are unnamed, on the owner of b-5,
	// whose answer (four tasks) ends before it.
	const created = 1_764_547_200_000
	unnamed := map[string]bool{"a-8": true, "a-7": true, "b-8": true, "b-7": true, "b-6": true}
	onP1 := map[string]bool{"b-4": true, "b-3": true, "b-2": true, "b-1": true, "b-0": true}
	owned := [2]map[string][]json.RawMessage{{}, {}}
	want := map[string][]string{}
	for _, tenant := range []string{"acme", "beta"} {
		for i := 9; i >= 0; i-- { // newest first
			id := fmt.Sprintf("%c-%d", tenant[0], i)
			p := 0
			if onP1[id] {
				p = 1
			}
			owned[p][tenant] = append(owned[p][tenant], newerTask(t, tenant, id, created+int64(i), unnamed[id]))
			if !unnamed[id] {
				want[tenant] = append(want[tenant], id)
			}
		}
	}
	for p := range owned {
		newerOwner(t, connect(t, s), p, owned[p])
	}
	const limit = 3
	for _, tenant := range []string{"acme", "beta"} {
		var got []string
		cursor := ""
		for pages := 1; ; pages++ {
			page, next, err := n.List(apollo.TaskFilter{Tenant: tenant, Limit: limit, Cursor: cursor})
			if err != nil {
				t.Fatalf("%s, page %d: %v", tenant, pages, err)
			}
			t.Logf("%s page %d: %d tasks, next %q", tenant, pages, len(page), next)
			for _, tk := range page {
				if tk.Tenant != tenant {
					t.Fatalf("%s, page %d: task %s of %q", tenant, pages, tk.TaskID, tk.Tenant)
				}
				got = append(got, tk.TaskID)
			}
			if next == "" {
				if len(page) == 0 && pages > 1 {
					t.Errorf("%s: the cursor of page %d led to an empty page", tenant, pages-1)
				}
				break
			}
			if len(page) != limit {
				t.Errorf("%s, page %d: %d tasks and a cursor; want %d", tenant, pages, len(page), limit)
			}
			if pages > 10 {
				t.Fatalf("%s: more than 10 pages: %v", tenant, got)
			}
			cursor = next
		}
		if !slices.Equal(got, want[tenant]) {
			t.Errorf("%s: the pages held %v; want %v (the tasks of a status this node cannot name passed over)", tenant, got, want[tenant])
		}
	}
}
