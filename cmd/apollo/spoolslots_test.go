//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo/internal/flock"
	"github.com/apollo-11/apollo/internal/testwait"
)

// TestExecFreesTheSlotsItDrained: after an outage, apollo exec's spool
// holds the events of many runs, one slot each. The first run after it
// sends them, through a client per slot, and held every one of those
// slots locked until its own command ended: behind a long job, every
// other run of the token found all 16 slots taken and reported without a
// spool, so that its events were lost if the server went away again. A
// slot whose events were sent is free again at once. The token may send
// 5 events a second, so most drainers are first answered 429: each sends
// again when told to, where a drainer used to keep its events for the
// next run at the first refusal (it failed so, 2 times in 15, on a
// loaded machine without the rate).
func TestExecFreesTheSlotsItDrained(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 5, "a", "b") // 5 events a second: most of the 15 drainers are answered 429 first
	a := tenants[0]
	addr, _, _ := inProcess(t, cfg)
	root := t.TempDir()
	part := filepath.Join(root, spoolPartition(a.agent))
	// The outage: 15 runs left their events in slots 00 to 14.
	orphans := spoolSlots - 1
	for i := range orphans {
		slot := filepath.Join(part, fmt.Sprintf("slot-%02d", i))
		if err := os.MkdirAll(slot, 0o700); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf(`{"taskID":"old-%d","name":"job","sequence":4,"status":"success","ts":%d}`+"\n", i, time.Now().UnixMilli())
		if err := os.WriteFile(filepath.Join(slot, "0000000000000001-0000.ndjson"), []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// A long job starts: it sends the outage's events, then runs on.
	stdin, hold, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer hold.Close()
	type result struct {
		code int
		err  string
	}
	long := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"exec", "--server", "http://" + addr, "--token", a.agent, "--spool", root,
			"--name", "long", "--task", "long-1", "--", "sh", "-c", "cat >/dev/null"}, stdin, &out, &errb)
		long <- result{code, errb.String()}
	}()
	deadline := time.Now().Add(testwait.Timeout(t))
	for {
		tasks := sdkTasks(t, addr, a)
		sent := 0
		for i := range orphans {
			if _, ok := tasks[fmt.Sprintf("old-%d", i)]; ok {
				sent++
			}
		}
		free := 0
		for i := range orphans {
			if f, ok, err := tryLock(filepath.Join(part, fmt.Sprintf("slot-%02d.lock", i))); err == nil && ok {
				flock.Release(f)
				free++
			}
		}
		if sent == orphans && free == orphans {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("while the long job runs: %d of %d earlier runs sent, %d of their slots free", sent, orphans, free)
		}
		time.Sleep(20 * time.Millisecond) // polling the server and the locks
	}

	// Meanwhile another run of the token meets a server gone away: its
	// events wait in the spool.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"exec", "--server", "http://127.0.0.1:1", "--token", a.agent, "--spool", root,
		"--name", "job", "--task", "short-1", "--", "true"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("short run: exit %d: %s", code, errb.String())
	}
	if strings.Contains(errb.String(), "without a spool") || !hasSpoolFiles(part) {
		t.Fatalf("the short run kept nothing: %s", errb.String())
	}
	hold.Close()
	if r := <-long; r.code != 0 {
		t.Fatalf("long run: exit %d: %s", r.code, r.err)
	}
	// The next run sends them, into tenant a only.
	if code := run(context.Background(), []string{"exec", "--server", "http://" + addr, "--token", a.agent, "--spool", root,
		"--name", "job", "--task", "short-2", "--", "true"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("next run: exit %d: %s", code, errb.String())
	}
	if _, ok := sdkTasks(t, addr, a)["short-1"]; !ok {
		t.Fatal("short-1 was not sent by the next run")
	}
	if _, ok := sdkTasks(t, addr, tenants[1])["short-1"]; ok {
		t.Fatal("short-1 reached tenant b")
	}
}
