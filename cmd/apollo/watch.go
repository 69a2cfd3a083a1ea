package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
)

// The processes of the three-process mode watch each other through their
// heartbeats in Redis (docs/monitoring.md, "Who tells whom"). Every bus,
// alert and sched process writes one (redisstore.Heartbeat); every bus and
// alert process runs a componentWatch over all of them, its own included.

// componentKinds are the kinds of process, in the order they are reported.
var componentKinds = []string{"bus", "alert", "sched"}

// requiredKind says whether the mode works without any process of a kind:
// without a bus or an alert process it does not; many run no scheduler, so
// only the loss of one that was running is news.
func requiredKind(kind string) bool { return kind != "sched" }

// componentWatch follows the heartbeats and calls down when a process
// stops:
//   - a process whose heartbeat expired (it did not shut down) is lost,
//     once its beat has been missing for an interval, time enough for a
//     live process to write it again (Redis restarted empty, say);
//   - a bus or alert kind with no process left for an interval is down,
//     whether its processes died or were stopped, after a start-up grace
//     of three intervals; a kind whose last process was lost is down at
//     once.
//
// A kind is reported once per outage, with every process lost at that
// check; a lost process among others still running is reported on its
// own. down gets the number of processes of each kind still running.
type componentWatch struct {
	c       redis.UniversalClient
	prefix  string
	every   time.Duration
	log     *slog.Logger
	down    func(kind, summary string, running map[string]int)
	started time.Time
	beats   *redisstore.BeatReader
	unread  *loglimit.Limiter // the heartbeats could not be read
	life    lifecycle.Group
	closers []func() // after the loop ends

	mu       sync.Mutex
	alive    map[string][]redisstore.Beat // by kind, at the last check
	known    map[string]redisstore.Beat   // by beatKey: the last beat of a process seen running
	missing  map[string]time.Time         // by beatKey: since when a known process's beat is absent
	empty    map[string]time.Time         // by kind: since when none runs
	lastAt   map[string]time.Time         // by kind: the last beat seen of any of its processes
	reported map[string]bool              // by kind: its outage was told
}

func beatKey(b redisstore.Beat) string { return b.Component + ":" + b.ID }

// startComponentWatch checks now and every half interval until stop.
func startComponentWatch(ctx context.Context, c redis.UniversalClient, prefix string, every time.Duration, log *slog.Logger,
	down func(kind, summary string, running map[string]int)) *componentWatch {
	w := &componentWatch{c: c, prefix: prefix, every: every, log: log, down: down, started: time.Now(),
		beats: redisstore.NewBeatReader(c, prefix).WithLogger(log), unread: loglimit.New(time.Minute),
		life:  lifecycle.Group{Name: "component watch"},
		alive: map[string][]redisstore.Beat{}, known: map[string]redisstore.Beat{}, missing: map[string]time.Time{},
		empty: map[string]time.Time{}, lastAt: map[string]time.Time{}, reported: map[string]bool{}}
	// The wall clock, not an injected one: the beats it reads come from
	// other processes, stamped by theirs (docs/architecture.md, "Lifecycle").
	_ = w.life.Start(ctx, func(context.Context) error { // a new group always starts
		w.life.Go(func(ctx context.Context) error {
			w.check(ctx)
			t := time.NewTicker(max(every/2, 100*time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-t.C:
					w.check(ctx)
				case <-ctx.Done():
					return nil
				}
			}
		})
		return nil
	})
	return w
}

// stop ends the checks and waits for the one running.
func (w *componentWatch) stop() {
	w.life.StopThen(context.Background(), func() error {
		for _, f := range w.closers {
			f()
		}
		return nil
	})
}

type notice struct{ kind, summary string }

// check reads the heartbeats and tells what stopped. Before it tells
// anything, it looks again with a SCAN for processes of the build before
// the heartbeat index, which beat without indexing (an upgrade under
// way): only then, so that a watch costs round trips by processes, not by
// the keys in the database (redisstore.BeatReader).
func (w *componentWatch) check(ctx context.Context) {
	beats, err := w.beats.Read(ctx)
	if err != nil {
		// Nothing is known, nothing changes: but while it lasts, a process
		// that dies is not told, which the log says.
		if ok, held := w.unread.Allow("", time.Now()); ok && ctx.Err() == nil {
			w.log.Warn("the heartbeats cannot be read from Redis; no process's loss is told while this lasts", "err", err, "suppressed", held)
		}
		return
	}
	now := time.Now()
	w.mu.Lock()
	before := w.saveState()
	out := w.judge(beats, now)
	if len(out) > 0 {
		w.mu.Unlock()
		more, err := w.beats.Rescan(ctx)
		w.mu.Lock()
		if err == nil && slices.ContainsFunc(more, func(b redisstore.Beat) bool {
			return !slices.ContainsFunc(beats, func(a redisstore.Beat) bool { return beatKey(a) == beatKey(b) })
		}) {
			w.restoreState(before)
			out = w.judge(more, now)
		}
	}
	n := running(w.alive)
	w.mu.Unlock()
	for _, nt := range out {
		w.log.Error("component down: "+nt.summary, "component", nt.kind)
		if w.down != nil {
			w.down(nt.kind, nt.summary, n)
		}
	}
}

// watchState is what judge changes, kept to judge again.
type watchState struct {
	alive              map[string][]redisstore.Beat
	known              map[string]redisstore.Beat
	missing, empty, at map[string]time.Time
	reported           map[string]bool
}

func (w *componentWatch) saveState() watchState {
	return watchState{maps.Clone(w.alive), maps.Clone(w.known), maps.Clone(w.missing), maps.Clone(w.empty), maps.Clone(w.lastAt), maps.Clone(w.reported)}
}

func (w *componentWatch) restoreState(s watchState) {
	w.alive, w.known, w.missing, w.empty, w.lastAt, w.reported = s.alive, s.known, s.missing, s.empty, s.at, s.reported
}

// running is how many processes of each kind run.
func running(alive map[string][]redisstore.Beat) map[string]int {
	n := map[string]int{}
	for _, kind := range componentKinds {
		n[kind] = len(alive[kind])
	}
	return n
}

// judge takes beats as the heartbeats now and returns what to tell.
// w.mu is held.
func (w *componentWatch) judge(beats []redisstore.Beat, now time.Time) []notice {
	alive, stopped := map[string][]redisstore.Beat{}, map[string]bool{}
	for _, b := range beats {
		k := beatKey(b)
		if b.Stopped {
			stopped[k] = true
			continue
		}
		alive[b.Component] = append(alive[b.Component], b)
		w.known[k] = b
		delete(w.missing, k)
		if b.At.After(w.lastAt[b.Component]) {
			w.lastAt[b.Component] = b.At
		}
	}
	lost := map[string][]redisstore.Beat{}
	for k, b := range w.known {
		switch since, isMissing := w.missing[k]; {
		case slices.ContainsFunc(alive[b.Component], func(a redisstore.Beat) bool { return beatKey(a) == k }):
		case stopped[k]: // shut down cleanly
			delete(w.known, k)
			delete(w.missing, k)
		case !isMissing:
			w.missing[k] = now
		case now.Sub(since) >= w.every:
			lost[b.Component] = append(lost[b.Component], b)
			delete(w.known, k)
			delete(w.missing, k)
		}
	}
	var out []notice
	for _, kind := range componentKinds {
		n := len(alive[kind])
		if n > 0 {
			if w.reported[kind] {
				w.log.Info("a "+kind+" process is running again", "processes", n)
			}
			delete(w.empty, kind)
			w.reported[kind] = false
		} else if _, ok := w.empty[kind]; !ok {
			w.empty[kind] = now
		}
		l := lost[kind]
		switch {
		case n == 0 && !w.reported[kind] && (len(l) > 0 ||
			requiredKind(kind) && now.Sub(w.empty[kind]) >= w.every && now.Sub(w.started) >= 3*w.every):
			w.reported[kind] = true
			out = append(out, notice{kind, w.noneLeft(kind, l)})
		case len(l) > 0:
			out = append(out, notice{kind, describeLost(l) + fmt.Sprintf("; %s processes still running: %d", kind, n)})
		}
	}
	w.alive = alive
	return out
}

// noneLeft says that no process of kind runs. w.mu is held.
func (w *componentWatch) noneLeft(kind string, lost []redisstore.Beat) string {
	s := "no " + kind + " process is running"
	switch {
	case len(lost) > 0:
		return s + ": " + describeLost(lost)
	case !w.lastAt[kind].IsZero():
		return s + ": the last one stopped; its last heartbeat was at " + w.lastAt[kind].UTC().Format(time.DateTime) + " UTC"
	}
	return fmt.Sprintf("%s: none has sent a heartbeat to Redis in the %v since this process started", s, time.Since(w.started).Round(time.Second))
}

// describeLost names processes that stopped without shutting down.
func describeLost(lost []redisstore.Beat) string {
	names := make([]string, len(lost))
	last := lost[0].At
	for i, b := range lost {
		names[i] = fmt.Sprintf("%s (host %s, pid %d)", b.ID, b.Host, b.PID)
		if b.At.After(last) {
			last = b.At
		}
	}
	verb := "stopped"
	if len(lost) > 1 {
		verb = "all stopped"
	}
	return fmt.Sprintf("the %s process %s %s sending heartbeats without shutting down (last at %s UTC)",
		lost[0].Component, strings.Join(names, ", "), verb, last.UTC().Format(time.DateTime))
}

// status is what /api/v1/system shows under components: each kind's
// running processes, with what they report, and since when none runs.
func (w *componentWatch) status(tenant string, serves func(tenant, channel string) bool) any {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]any{}
	for _, kind := range componentKinds {
		out[kind] = map[string]any{"alive": len(w.alive[kind]), "processes": beatsFor(w.alive[kind], tenant, serves), "downSince": w.empty[kind]}
	}
	return out
}

// startBusWatch is the bus's watch. The bus has no alert engine: while an
// alert process runs, that process notices the same outage from its own
// watch and tells it through its engine (whose dedup lock makes one of
// several alert processes send it). The bus tells only what happens while
// no alert process runs, through a dispatcher of its own over the channels
// of its configuration: the alert processes' death among it.
func startBusWatch(ctx context.Context, c redis.UniversalClient, cfg config.Config, n *selfNotifier, log *slog.Logger) *componentWatch {
	_ = n.disp.Start(ctx) // a new dispatcher always starts; stop stops it
	w := startComponentWatch(ctx, c, cfg.Redis.Prefix, cfg.Alert.Heartbeat.D(), log, func(kind, summary string, running map[string]int) {
		if running["alert"] == 0 {
			n.send(kind, summary)
		}
	})
	w.closers = append(w.closers, func() { stopService(context.Background(), log, "the bus's notification lanes", n.disp) })
	return w
}

// selfNotifier sends a notice about Apollo-11 itself to the default
// tenant's channels, as the alert engine's self-alerts do, without an
// engine.
type selfNotifier struct {
	disp     *notify.Dispatcher
	channels []string
	clock    apollo.Clock
}

func newSelfNotifier(cfg config.Config, log *slog.Logger) (*selfNotifier, error) {
	disp, err := buildDispatcher(cfg, apollo.SystemClock, log, io.Discard, nil, nil)
	if err != nil {
		return nil, err
	}
	return &selfNotifier{disp: disp, channels: disp.ChannelsFor(""), clock: apollo.SystemClock}, nil
}

// send tells that a component is down: the rule name is the one the
// alert processes' self-alert of the same outage has.
func (n *selfNotifier) send(kind, summary string) {
	if len(n.channels) == 0 {
		return // logged by the watch; there is no one to tell
	}
	now := n.clock.Now()
	rule := "apollo:" + componentDown(kind)
	a := apollo.Alert{ID: "bus-" + strconv.FormatInt(now.UnixNano(), 36), Rule: rule, Group: "apollo",
		State: apollo.AlertFiring, Severity: apollo.SeverityCritical, Summary: summary, Value: 1, Count: 1,
		Channels: n.channels, TopNames: []string{componentDown(kind)}, StartedAt: now, FiredAt: now}
	n.disp.Send(apollo.Notification{Kind: apollo.NotifySelf, Alert: a, Channels: n.channels, At: now,
		DedupKey: rule + ":bus:" + strconv.FormatInt(now.UnixMilli(), 10)})
}

// componentDown is the self-alert of a kind that stopped: one name per
// kind, so that one kind's outage never hides another's in the dedup
// window.
func componentDown(kind string) string { return "apollo_component_down:" + kind }
