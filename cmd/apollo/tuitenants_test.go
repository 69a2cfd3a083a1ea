package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/coder/websocket"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/testwait"
)

// streamTasks opens the stream as tenant, subscribes (resuming from
// cursor, if any) and returns the answer's task IDs, its cursor and its
// reason ("" for the tasks of a resume).
func (d *deployment) streamTasks(tenant, cursor string) (ids []string, next, reason string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Timeout(d.t))
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+d.api.addr+"/api/v1/stream", &websocket.DialOptions{
		Subprotocols: []string{apiclient.StreamProtocol},
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + d.tokens[tenant]}},
	})
	if err != nil {
		d.t.Fatalf("the stream as %s: %v", tenant, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "cursor": cursor, "filter": map[string]any{"types": []string{"tasks"}}})
	if err := conn.Write(ctx, websocket.MessageText, sub); err != nil {
		d.t.Fatal(err)
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			d.t.Fatalf("the stream as %s: %v", tenant, err)
		}
		f, err := apiclient.DecodeFrame(data)
		if err != nil {
			d.t.Fatalf("the stream as %s: %v", tenant, err)
		}
		var tasks []apollo.Task
		switch m := f.Msg.(type) {
		case *apiclient.Snapshot:
			tasks, next, reason = m.Tasks, m.Cursor, m.Reason
		case *apiclient.Tasks:
			tasks, next = m.Tasks, m.Cursor
		default:
			continue
		}
		for _, t := range tasks {
			ids = append(ids, t.TaskID)
		}
		slices.Sort(ids)
		return ids, next, reason
	}
}

// Two tenants watch their tasks live, each in a TUI on the Tasks tab and
// over a stream of its own, when the server is killed with SIGKILL and
// started again on the same data and address. Before and after the
// kill, and after the clients' reconnect (the TUIs on their own, the
// stream resuming from a cursor of the process killed), each sees its
// own runs, those reported before the kill too, and never the other
// tenant's.
func TestLiveViewsOfTwoTenantsAcrossAKill(t *testing.T) {
	endToEnd(t)
	d := startDeployment(t, false, newHook(t), deployOptions{})
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_before")
	}
	clocks := map[string]*apollo.FakeClock{}
	screens := map[string]shownTUI{}
	cursors := map[string]string{}
	other := map[string]string{"acme": "globex", "globex": "acme"}
	for _, tenant := range tenants {
		clocks[tenant] = apollo.NewFakeClock(time.Now())
		s, p := runTUI(t, d.api.addr, d.tokens[tenant], clocks[tenant])
		p.Send(tea.KeyPressMsg{Code: '2', Text: "2"})
		text := s.until(t, tenant+"'s run, live", func(text string) bool {
			return strings.Contains(text, "● live") && strings.Contains(text, tenant+"_before-")
		})
		if strings.Contains(text, other[tenant]) {
			t.Fatalf("%s's dashboard shows %s's runs:\n%s", tenant, other[tenant], text)
		}
		screens[tenant] = s
		ids, cursor, _ := d.streamTasks(tenant, "")
		if len(ids) != 1 || !strings.HasPrefix(ids[0], tenant+"_before-") {
			t.Fatalf("%s's stream snapshot: %v, want its one run", tenant, ids)
		}
		cursors[tenant] = cursor
	}

	addr := d.api.addr
	d.api.kill()
	for _, tenant := range tenants {
		screens[tenant].until(t, tenant+"'s connection lost", func(text string) bool { return strings.Contains(text, "○ reconnecting") })
	}
	args := append([]string(nil), d.args...)
	for i := range args {
		if args[i] == "127.0.0.1:0" {
			args[i] = addr
		}
	}
	d.api = startApollo(t, args...)
	for _, tenant := range tenants {
		d.fail(tenant, tenant+"_after")
	}
	for _, tenant := range tenants {
		clocks[tenant].Advance(time.Minute) // the reconnect is due
		text := screens[tenant].until(t, tenant+"'s runs of before and after the kill, live again", func(text string) bool {
			return strings.Contains(text, "● live") && strings.Contains(text, tenant+"_before-") && strings.Contains(text, tenant+"_after-")
		})
		if strings.Contains(text, other[tenant]) {
			t.Errorf("%s's dashboard shows %s's runs after the restart:\n%s", tenant, other[tenant], text)
		}
		// The cursor is of the process killed: the stream starts over
		// from a snapshot, of the tenant's runs alone.
		ids, _, reason := d.streamTasks(tenant, cursors[tenant])
		if len(ids) != 2 || !strings.HasPrefix(ids[0], tenant+"_after-") || !strings.HasPrefix(ids[1], tenant+"_before-") || reason != "cursor too old" {
			t.Errorf("%s's stream resumed after the restart: %v (%q), want its two runs from a snapshot", tenant, ids, reason)
		}
	}
}
