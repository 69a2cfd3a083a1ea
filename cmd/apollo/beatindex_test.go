package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/notify/webhook"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
)

// An upgrade under way: the bus runs this build, which finds heartbeats
// through their index, and an alert process of the build before beats
// without indexing (here written by the test, as that build writes it:
// the key alone), starting after the bus. The bus sees it before it
// would call the alert processes down, calls nothing down while it
// beats, and tells its kill -9 as it told one before the index.
func TestHeartbeatOfThePreviousBuildDuringAnUpgrade(t *testing.T) {
	endToEnd(t)
	c, prefix := redistest.Client(t)
	h := newHook(t)
	dir := writeScenario(t, h.srv.URL, redistest.URLFor(t, prefix), prefix)
	bus := startScenarioBus(t, dir, filepath.Join(dir, "apollo.yaml"))

	ctx := context.Background()
	key := prefix + ":heartbeat:alert:oldhost-77"
	host, _ := os.Hostname()
	beat := func() {
		data, _ := json.Marshal(redisstore.Beat{Component: "alert", ID: "oldhost-77", Host: host, PID: 77, At: time.Now(), Every: time.Second})
		if err := c.Set(ctx, key, data, 3*time.Second).Err(); err != nil {
			t.Error(err)
		}
	}
	beat()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tk := time.NewTicker(200 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				beat()
			case <-stop:
				return
			}
		}
	}()
	eventually(t, testwait.Timeout(t), "the bus seeing the alert process of the previous build", func() bool {
		var sys map[string]any
		apiGet(t, bus.addr, "/api/v1/system", &sys)
		a, _ := sys["components"].(map[string]any)["alert"].(map[string]any)
		return a["alive"] == float64(1)
	})
	// Its kill -9: the beats stop and the key goes.
	close(stop)
	<-stopped
	c.Del(ctx, key)
	p := h.await(t, testwait.Timeout(t), "the alert process down", func(p webhook.ApolloPayload) bool {
		return strings.Contains(p.Alert.Rule, "apollo_component_down")
	})
	if !strings.Contains(p.Alert.Summary, "oldhost-77") {
		t.Fatalf("the first component-down notice is %q: want the previous build's process, lost", p.Alert.Summary)
	}
}
