package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
)

// Invariant 11 (docs/architecture.md): any value ingest accepts survives snapshot,
// restore and replay. These tests decode bodies as the server does,
// publish what the decoder accepts, checkpoint, and rebuild the state two
// ways, from the snapshot and by replaying the log, for two tenants; the
// two must read back, and agree on every task and every metric.

var surviveNow = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// memLog is a bus.Log in memory: every append is durable at once.
type memLog struct {
	mu   sync.Mutex
	recs [][]byte
}

func (l *memLog) Append(p []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, bytes.Clone(p))
	return uint64(len(l.recs)), nil
}

func (l *memLog) Wait(context.Context, uint64) error { return nil }

// node is a bus with its metrics, as the all-in-one server wires them.
type node struct {
	bus *bus.Bus
	agg *metrics.Aggregator
}

func newNode(t testing.TB, clock apollo.Clock, log bus.Log) *node {
	t.Helper()
	agg, err := metrics.New(metrics.Options{Clock: clock, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bus.New(bus.Options{Clock: clock, Log: log, Observers: []bus.Observer{agg}, Workers: 1, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	return &node{bus: b, agg: agg}
}

// checkSurvives publishes what body decodes to, alternating two tenants,
// and checks that the checkpointed state restores and equals a replay of
// the log up to the checkpoint.
func checkSurvives(t *testing.T, body []byte, ndjson bool) {
	t.Helper()
	evs, bad, err := decodeEvents(body, ndjson, maxEventsPerRequest)
	if err != nil {
		return
	}
	var good []apollo.Event
	for i := range evs {
		if bad[i] == nil {
			evs[i].Tenant = []string{"a", "b"}[len(good)%2]
			good = append(good, evs[i])
		}
	}
	clock := apollo.NewFakeClock(surviveNow)
	log := &memLog{}
	live := newNode(t, clock, log)
	if err := live.bus.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer live.bus.Stop(context.Background())
	if err := live.bus.Publish(t.Context(), good, make([]bus.Outcome, len(good))); err != nil {
		t.Fatal(err)
	}
	var state, snap bytes.Buffer
	var at uint64
	if err := live.bus.Checkpoint(func(lsn uint64) error {
		at = lsn
		if err := live.bus.WriteState(&state); err != nil {
			return err
		}
		return live.agg.WriteSnapshot(&snap)
	}); err != nil {
		t.Fatal(err)
	}

	restored := newNode(t, clock, nil)
	if err := restored.bus.ReadState(bytes.NewReader(state.Bytes())); err != nil {
		t.Fatalf("the bus state does not read back: %v\nbody %s", err, clip(body))
	}
	if err := restored.agg.ReadSnapshot(bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatalf("the metrics snapshot does not read back: %v\nbody %s", err, clip(body))
	}
	replayed := newNode(t, clock, nil)
	log.mu.Lock()
	recs := log.recs[:at]
	log.mu.Unlock()
	for i, p := range recs {
		if err := replayed.bus.Replay(uint64(i+1), p); err != nil {
			t.Fatalf("record %d does not replay: %v", i+1, err)
		}
	}
	for _, e := range good {
		a, errA := restored.bus.Get(e.Tenant, e.TaskID)
		b, errB := replayed.bus.Get(e.Tenant, e.TaskID)
		if (errA == nil) != (errB == nil) || errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("task %s/%q: restored %+v (%v), replayed %+v (%v)\nbody %s", e.Tenant, e.TaskID, a, errA, b, errB, body)
		}
	}
	for _, tn := range []string{"a", "b"} {
		for _, w := range []time.Duration{10 * time.Second, time.Minute, time.Hour, 24 * time.Hour} {
			q := metrics.Query{Tenant: tn, Window: w, Now: clock.Now()}
			ta, errA := restored.agg.Table(t.Context(), q)
			tb, errB := replayed.agg.Table(t.Context(), q)
			if errA != nil || errB != nil || !reflect.DeepEqual(ta.Names, tb.Names) || !reflect.DeepEqual(ta.Rows, tb.Rows) {
				t.Fatalf("tenant %s, %v window: restored %v %+v (%v), replayed %v %+v (%v)\nbody %s", tn, w, ta.Names, ta.Rows, errA, tb.Names, tb.Rows, errB, body)
			}
			for i, r := range ta.Rows {
				if r.CostSum < 0 || r.CostMin < 0 || r.CostMax < 0 || r.Running < 0 || r.Backlog < 0 {
					t.Fatalf("tenant %s, %v window, job %q: %+v has a negative sum or gauge\nbody %s", tn, w, ta.Names[i], r, body)
				}
			}
		}
	}
}

// issuePayload is issue 16.1's: the second event's cost made every later
// snapshot unreadable, and the server panicked on restart.
func issuePayload(ts int64) string {
	return fmt.Sprintf(`[{"taskID":"c1","sequence":1,"status":"running","ts":%d},{"taskID":"c1","sequence":2,"status":"success","ts":%d,"costMs":5000000000000000000}]`, ts, ts)
}

// survivePools are the values events are drawn from: the bounds of every
// range, just outside them, and ordinary values near the clock.
var survivePools = func() map[string][]int64 {
	now := surviveNow.UnixMilli()
	return map[string][]int64{
		"sequence":    {1, 2, 3, 4, apollo.MaxSequence - 1, apollo.MaxSequence, apollo.MaxSequence + 1, math.MaxInt64, 0},
		"ts":          {now, now - 5_000, now - 40_000, now + 30_000, now + 120_000, now - 25*3600_000, apollo.MinTs, apollo.MaxTs, apollo.MaxTs + 1, math.MaxInt64, now / 1000, -now},
		"scheduledAt": {0, now - 60_000, now, apollo.MinTs, apollo.MaxTs, math.MaxInt64},
		"timeoutMs":   {0, 1, 60_000, apollo.MaxDurationMs, apollo.MaxDurationMs + 1, math.MaxInt64},
		"costMs":      {0, 1, 1234, apollo.MaxDurationMs, 1 << 62, 5e18, math.MaxInt64},
	}
}()

var surviveFields = []string{"sequence", "ts", "scheduledAt", "timeoutMs", "costMs"}

// randomBody makes a batch of events for a few tasks with values from
// survivePools, usually in range.
func randomBody(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('[')
	n := 1 + rng.IntN(12)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		st := apollo.Statuses()[rng.IntN(len(apollo.Statuses()))]
		fmt.Fprintf(&b, `{"taskID":"t%d","name":"job%d","status":"%s"`, rng.IntN(4), rng.IntN(2), st)
		for _, f := range surviveFields {
			pool := survivePools[f]
			if f == "sequence" && rng.IntN(3) > 0 {
				fmt.Fprintf(&b, `,"sequence":%d`, i+1)
				continue
			}
			if rng.IntN(4) > 0 || f == "ts" {
				fmt.Fprintf(&b, `,"%s":%d`, f, pool[rng.IntN(len(pool))])
			}
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.String()
}

func TestAcceptedEventsSurviveRestart(t *testing.T) {
	t.Parallel()
	checkSurvives(t, []byte(issuePayload(surviveNow.UnixMilli())), false)
	rng := rand.New(rand.NewPCG(16, 1))
	for range 300 {
		checkSurvives(t, []byte(randomBody(rng)), false)
	}
}

func FuzzAcceptedEventsSurviveRestart(f *testing.F) {
	f.Add([]byte(issuePayload(surviveNow.UnixMilli())), false)
	rng := rand.New(rand.NewPCG(16, 2))
	for range 20 {
		f.Add([]byte(randomBody(rng)), false)
	}
	f.Add([]byte(strings.ReplaceAll(strings.Trim(randomBody(rng), "[]"), "},{", "}\n{")), true)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		checkSurvives(t, body, ndjson)
	})
}
