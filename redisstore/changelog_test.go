package redisstore_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
	"github.com/apollo-11/apollo/rules"
)

// The feed saves the bus's mark with each batch, read before the batch
// was taken, and a follower started from a saved position reads on from
// it: what was written while it was away arrives, once, with its LSN,
// and its mark is the batch's.
func TestChangeLogKeepsTheMarkAndThePosition(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	if _, ok, err := redisstore.FeedMark(ctx, c, prefix); ok || err != nil {
		t.Fatalf("a mark before any feed: ok %v, err %v", ok, err)
	}
	mark := uint64(0)
	feed := redisstore.NewChangeFeed(c, prefix, nil).WithClock(apollo.NewFakeClock(time.Unix(0, 0))).WithMark(func() uint64 { return mark })
	feed.Start(ctx)
	// Saved at the start, even at 0: a restart replays above it.
	if m, ok, _ := redisstore.FeedMark(ctx, c, prefix); !ok || m != 0 {
		t.Fatalf("mark after the start: %d, %v; want 0, saved", m, ok)
	}
	fail := func(lsn uint64, tenant, id string) {
		feed.Apply(&apollo.Change{LSN: lsn, Prev: apollo.Before{Status: apollo.StatusRunning},
			Task: apollo.Task{TaskID: id, Name: "etl", Tenant: tenant, Status: apollo.StatusFailed}})
	}
	fail(1, "acme", "a1")
	mark = 1
	if err := feed.SaveMark(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan *apollo.Change, 10)
	first := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, nil)
	if err := first.Seek(ctx, 0, "0"); err != nil {
		t.Fatal(err)
	}
	first.Start(ctx)
	if ch := next(t, got); ch.LSN != 1 || ch.Task.TaskID != "a1" {
		t.Fatalf("first change %+v", ch)
	}
	eventuallyMark(t, first, 1)
	first.Stop(ctx)
	_, pos := first.Mark()

	fail(2, "globex", "g1")
	fail(3, "acme", "a2")
	mark = 3
	feed.Stop(ctx)
	if m, _, _ := redisstore.FeedMark(ctx, c, prefix); m != 3 {
		t.Fatalf("mark after the stop: %d, want 3", m)
	}
	forgot := make(chan struct{}, 1)
	again := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, func() { forgot <- struct{}{} })
	if err := again.Seek(ctx, 1, pos); err != nil {
		t.Fatal(err)
	}
	again.Start(ctx)
	defer again.Stop(ctx)
	for _, want := range []string{"g1", "a2"} {
		if ch := next(t, got); ch.Task.TaskID != want {
			t.Fatalf("after the restart: %+v, want %s", ch, want)
		}
	}
	eventuallyMark(t, again, 3)
	select {
	case ch := <-got:
		t.Fatalf("a change twice: %+v", ch)
	default:
	}

	// A bus on a new log (its data directory replaced): its LSNs start
	// over, below the saved mark, under a new epoch; the follower forgets
	// what it heard before it applies the new log's changes.
	fresh := redisstore.NewChangeFeed(c, prefix, nil).WithClock(apollo.NewFakeClock(time.Unix(0, 0))).WithMark(func() uint64 { return 1 })
	fresh.Start(ctx)
	fresh.Apply(&apollo.Change{LSN: 1, Prev: apollo.Before{Status: apollo.StatusRunning},
		Task: apollo.Task{TaskID: "n1", Name: "etl", Tenant: "globex", Status: apollo.StatusFailed}})
	fresh.Stop(ctx)
	select {
	case <-forgot:
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("the follower did not forget the old log's LSNs")
	}
	if ch := next(t, got); ch.Task.TaskID != "n1" || ch.LSN != 1 {
		t.Fatalf("the new log's change: %+v", ch)
	}
	eventuallyMark(t, again, 1)
}

func next(t *testing.T, got chan *apollo.Change) *apollo.Change {
	t.Helper()
	select {
	case ch := <-got:
		return ch
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("no change")
		return nil
	}
}

func eventuallyMark(t *testing.T, f *redisstore.ChangeFollower, want uint64) {
	t.Helper()
	deadline := time.Now().Add(testwait.Timeout(t))
	for {
		if m, _ := f.Mark(); m == want {
			return
		}
		if time.Now().After(deadline) {
			m, _ := f.Mark()
			t.Fatalf("follower's mark %d, want %d", m, want)
		}
		time.Sleep(time.Millisecond) // polling a state with a deadline
	}
}

// A flapping mark goes in the log apart from the batch (field f), with
// its LSN, for a current follower; the batch (b) and the channel
// <p>:changes, which a release before the mark decodes with the kinds it
// knows, never hold it; it goes on <p>:findings marked as logged, which
// a release before applies and SubscribeFindings passes over.
func TestFlappingMarksGoApartInTheChangeLog(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	old := c.Subscribe(ctx, prefix+":findings", prefix+":changes")
	defer old.Close()
	if _, err := old.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	heard := make(chan alert.Occurrence, 10)
	sub, err := redisstore.SubscribeFindings(ctx, c, prefix, nil, func(o alert.Occurrence) { heard <- o })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Stop()
	feed := redisstore.NewChangeFeed(c, prefix, nil).WithClock(apollo.NewFakeClock(time.Unix(0, 0))).WithMark(func() uint64 { return 4 })
	feed.Start(ctx)
	flapLSN := map[string]uint64{"acme": 2, "globex": 4}
	for _, tenant := range []string{"acme", "globex"} {
		feed.Apply(&apollo.Change{LSN: flapLSN[tenant] - 1, Prev: apollo.Before{Status: apollo.StatusRunning},
			Task: apollo.Task{TaskID: tenant + "-1", Name: "etl", Tenant: tenant, Status: apollo.StatusFailed}})
		feed.Apply(&apollo.Change{LSN: flapLSN[tenant], Prev: apollo.Before{Status: apollo.StatusSuccess},
			Record: apollo.Record{Event: apollo.Event{TaskID: tenant + "-2", Ts: 1000}, Kind: apollo.KindFlapping, Reason: "2 switches"},
			Task:   apollo.Task{TaskID: tenant + "-2", Name: "etl", Tenant: tenant, Status: apollo.StatusSuccess}})
	}
	if err := feed.SaveMark(ctx); err != nil {
		t.Fatal(err)
	}
	feed.Stop(ctx)

	entries, err := c.XRange(ctx, prefix+":{changes}:log", "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("the change log: %v, %v; want one entry", entries, err)
	}
	if b, _ := entries[0].Values["b"].(string); strings.Contains(b, "flapping") || !strings.Contains(b, "acme-1") {
		t.Fatalf("the batch a release before reads: %s", b)
	}
	// What a release before hears: the failures, and each flapping on
	// <p>:findings (it ignores "x").
	flaps := map[string]bool{}
	for len(flaps) < 2 {
		rctx, cancel := context.WithTimeout(ctx, testwait.Timeout(t))
		m, err := old.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if m.Channel == prefix+":changes" {
			if strings.Contains(m.Payload, "flapping") {
				t.Fatalf("a flapping mark on <p>:changes: %s", m.Payload)
			}
			continue
		}
		var f struct {
			T, J, K, D string
		}
		if err := json.Unmarshal([]byte(m.Payload), &f); err != nil || f.K != "flapping" || f.J != "etl" || f.D != "2 switches" {
			t.Fatalf("finding %s: %+v, %v", m.Payload, f, err)
		}
		flaps[f.T] = true
	}

	got := make(chan *apollo.Change, 10)
	follow := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, nil)
	if err := follow.Seek(ctx, 0, "0"); err != nil {
		t.Fatal(err)
	}
	follow.Start(ctx)
	defer follow.Stop(ctx)
	flapped := map[string]bool{}
	for range 4 {
		ch := next(t, got)
		if ch.Record.Kind == apollo.KindFlapping {
			if ch.LSN != flapLSN[ch.Task.Tenant] || ch.Record.Reason != "2 switches" || ch.Task.Name != "etl" {
				t.Fatalf("flapping mark %+v", ch)
			}
			flapped[ch.Task.Tenant] = true
		}
	}
	if len(flapped) != 2 {
		t.Fatalf("flapping marks of %v, want both tenants", flapped)
	}

	// A current subscriber passed the logged findings over: the first
	// it hears is one published after them, unlogged (a bus of the
	// release before).
	if err := redisstore.PublishFinding(ctx, c, prefix, alert.Occurrence{Tenant: "acme", Job: "later", Kind: rules.OccurrenceFlapping, At: time.UnixMilli(5)}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-heard:
		if o.Job != "later" {
			t.Fatalf("SubscribeFindings heard %+v, a finding in the log", o)
		}
	case <-time.After(testwait.Timeout(t)):
		t.Fatal("SubscribeFindings heard nothing")
	}
}

// A bus of a newer release writes changes of a record kind, or a status,
// this release does not know, among known ones: a follower passes over
// those alone, applies the rest of the entry (in b and in f, two
// tenants' failures and a flapping mark), moves its mark past the entry,
// and counts what it passed over. Before, one unknown kind made it refuse
// the whole of b: in a rolling upgrade every alert process not yet
// upgraded lost the failures of every batch that held one. The same on
// the channel <p>:changes, from a bus that writes no stream.
func TestChangeOfAnUnknownKindIsPassedOver(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := context.Background()
	// As a newer bus writes them: known changes, a mark of a kind
	// "paused", a status "skipped", and in f a flapping mark beside one
	// of a kind "flapping_again".
	batch := `[{"t":"acme","n":"etl","id":"a1","s":"failed","p":"running","ts":1,"l":1},` +
		`{"t":"acme","n":"etl","id":"a2","s":"running","p":"running","ts":2,"k":"paused","r":"by the newer bus","l":2,"y":7},` +
		`{"t":"globex","n":"etl","id":"g1","s":"failed","p":"running","ts":3,"l":3},` +
		`{"t":"globex","n":"etl","id":"g2","s":"skipped","p":"pending","ts":4,"l":4}]`
	flaps := `[{"t":"globex","n":"etl","id":"g3","s":"success","p":"success","ts":5,"k":"flapping_again","l":5},` +
		`{"t":"acme","n":"etl","id":"a3","s":"success","p":"success","ts":6,"k":"flapping","r":"2 switches","l":6}]`
	for _, values := range []map[string]any{
		{"v": "1", "e": "e1", "m": "6", "b": batch, "f": flaps},
		{"v": "1", "e": "e1", "m": "7", "b": `[{"t":"acme","n":"etl","id":"a4","s":"failed","p":"running","ts":7,"l":7}]`},
	} {
		if err := c.XAdd(ctx, &redis.XAddArgs{Stream: prefix + ":{changes}:log", Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan *apollo.Change, 10)
	follow := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { got <- ch }, nil)
	if err := follow.Seek(ctx, 0, "0"); err != nil {
		t.Fatal(err)
	}
	follow.Start(ctx)
	defer follow.Stop(ctx)
	want := []string{"a1 failed report", "g1 failed report", "a3 success flapping", "a4 failed report"}
	for _, w := range want {
		ch := next(t, got)
		if s := ch.Task.TaskID + " " + ch.Task.Status.String() + " " + ch.Record.Kind.String(); s != w {
			t.Fatalf("applied %q (%+v), want %q", s, ch, w)
		}
	}
	eventuallyMark(t, follow, 7)
	if n := follow.Stats().PassedOver; n != 3 {
		t.Fatalf("%d changes counted as passed over, want 3", n)
	}
	select {
	case ch := <-got:
		t.Fatalf("applied %+v as well", ch)
	default:
	}

	// The channel, from a bus that writes no stream: the same.
	heard := make(chan *apollo.Change, 10)
	stop, err := redisstore.NewChangeFollower(c, prefix, nil, func(ch *apollo.Change) { heard <- ch }, nil).SubscribeChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := c.Publish(ctx, prefix+":changes", batch).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, prefix+":changes", `[{"t":"acme","n":"etl","id":"a5","s":"failed","p":"running","ts":8}]`).Err(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"a1", "g1", "a5"} {
		if ch := next(t, heard); ch.Task.TaskID != w {
			t.Fatalf("from the channel: %+v, want %s", ch, w)
		}
	}
}

// What does not read on the channel <p>:changes — a message that is not
// a batch of changes at all, a change of a status or kind of a newer
// release, of either tenant — is passed over, counted where the change
// log's are (changes.passedOver), and logged one line a minute with how
// many were held back; the rest of a batch is applied, and a change the
// log has too ("x") passes uncounted. Before, a message that was not a
// batch, or a change that did not read, went without a count or a line.
func TestUnreadableChangeOnTheChannelIsCounted(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := testwait.Context(t)
	var logs redisstore.LockedLog
	log := slog.New(slog.NewTextHandler(&logs, nil))
	clock := apollo.NewFakeClock(time.Unix(1_800_000_000, 0))
	heard := make(chan *apollo.Change, 10)
	follow := redisstore.NewChangeFollower(c, prefix, log, func(ch *apollo.Change) { heard <- ch }, nil).WithClock(clock)
	stop, err := follow.SubscribeChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	publish := func(payloads ...string) {
		t.Helper()
		for _, p := range payloads {
			if err := c.Publish(ctx, prefix+":changes", p).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// heardOnly waits for the changes ids, in order, and nothing else:
	// the last heard, every message before it was handled.
	heardOnly := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if ch := next(t, heard); ch.Task.TaskID != id {
				t.Fatalf("from the channel: %+v, want %s", ch, id)
			}
		}
	}
	publish(
		"not json\x00\x1b[2J",
		`{"t":"acme","n":"etl","id":"a0","s":"failed"}`, // an object, not a batch
		`[{"t":"acme","n":"etl","id":"a1","s":"failed","p":"running","ts":1},`+
			`{"t":"globex","n":"etl","id":"g1","s":"skipped","p":"pending","ts":2},`+
			`{"t":"acme","n":"etl","id":"a2","s":"running","p":"running","ts":3,"k":"paused"},`+
			`{"t":"globex","n":"etl","id":"g2","s":"skipped","p":"pending","ts":4,"x":true},`+
			`{"t":"globex","n":"etl","id":"g3","s":"failed","p":"running","ts":5}]`)
	heardOnly("a1", "g3")
	if n := follow.Stats().PassedOver; n != 4 {
		t.Fatalf("%d changes counted as passed over, want 4: two messages that are no batch, a status and a kind of a newer release", n)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, prefix+":changes does not read") ||
		!strings.Contains(out, "changes.passedOver") || !strings.Contains(out, `why="not a batch of changes: invalid character`) {
		t.Fatalf("the log says:\n%s\nwant one warning naming the channel, why, and where the rest are counted", out)
	}
	// A minute on, the next one is logged with how many were held back.
	clock.Advance(time.Minute)
	publish(`[{"t":"acme","n":"etl","id":"a3","s":"skipped","p":"running","ts":6},{"t":"acme","n":"etl","id":"a4","s":"failed","p":"running","ts":7}]`)
	heardOnly("a4")
	if n := follow.Stats().PassedOver; n != 5 {
		t.Fatalf("%d changes counted as passed over, want 5", n)
	}
	out = logs.String()
	if strings.Count(out, "level=WARN") != 2 || !strings.Contains(out, `tenant=acme job=etl why="status \"skipped\"" suppressed=3`) {
		t.Fatalf("the log says:\n%s\nwant a second warning a minute on, naming the change, with the 3 held back", out)
	}
}

// A change of the channel passed over first does not hold back the
// line of the first change of the log passed over: each says what it
// passed over, one a minute of each. Before, the log's line went out
// only for the first passed over of either, so an alert process that
// had heard a stray message on the channel never said that the change
// log held a kind it does not know (TestThreeProcessChangeOfANewerKindKeepsItsBatch
// failed whenever the channel's message was read first).
func TestPassedOverOnTheChannelDoesNotSilenceTheLog(t *testing.T) {
	c, prefix := redistest.Client(t)
	ctx := testwait.Context(t)
	var logs redisstore.LockedLog
	log := slog.New(slog.NewTextHandler(&logs, nil))
	got := make(chan *apollo.Change, 10)
	follow := redisstore.NewChangeFollower(c, prefix, log, func(ch *apollo.Change) { got <- ch }, nil).
		WithClock(apollo.NewFakeClock(time.Unix(1_800_000_000, 0)))
	stop, err := follow.SubscribeChannel(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := c.Publish(ctx, prefix+":changes", "\x00 not a batch").Err(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(testwait.Timeout(t)); follow.Stats().PassedOver != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the channel's message was never passed over")
		}
		time.Sleep(time.Millisecond) // polling a count with a deadline
	}
	batch := `[{"t":"acme","n":"etl","id":"a1","s":"running","p":"running","ts":1,"k":"paused","l":1},` +
		`{"t":"globex","n":"etl","id":"g1","s":"failed","p":"running","ts":2,"l":2}]`
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: prefix + ":{changes}:log",
		Values: map[string]any{"v": "1", "e": "e1", "m": "2", "b": batch}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := follow.Seek(ctx, 0, "0"); err != nil {
		t.Fatal(err)
	}
	follow.Start(ctx)
	defer follow.Stop(ctx)
	if ch := next(t, got); ch.Task.TaskID != "g1" {
		t.Fatalf("applied %+v, want g1", ch)
	}
	out := logs.String()
	if !strings.Contains(out, prefix+":changes does not read") || !strings.Contains(out, `of the change log does not read`) ||
		!strings.Contains(out, `why="record kind \"paused\""`) {
		t.Fatalf("the log says:\n%s\nwant a line for the channel's message and one for the log's change", out)
	}
}
