package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/cluster"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/internal/testwait"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/redisstore/redistest"
	"github.com/apollo-11/apollo/rules"
	"github.com/apollo-11/apollo/sched"
	"github.com/apollo-11/apollo/stream"
)

// The rules of docs/architecture.md ("Lifecycle"), one table test each,
// over every long-running component.

type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// component builds one long-running component, on a fake clock.
type component struct {
	name string
	// pkg is the import path whose goroutines the component starts.
	pkg string
	// restarts: a Start after Stop starts it again (lifecycle.Group.Restart).
	restarts bool
	make     func(t *testing.T, clock *apollo.FakeClock) service
}

type nopSender struct{}

func (nopSender) Send(apollo.Notification) {}

func newBus(t *testing.T, clock apollo.Clock) *bus.Bus {
	b, err := bus.New(bus.Options{Clock: clock, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newAggregator(t *testing.T, clock apollo.Clock) *metrics.Aggregator {
	a, err := metrics.New(metrics.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func components(t *testing.T) []component {
	const mod = "github.com/apollo-11/apollo/"
	return []component{
		{"bus", mod + "bus", false, func(t *testing.T, c *apollo.FakeClock) service { return newBus(t, c) }},
		{"stream hub", mod + "stream", false, func(t *testing.T, c *apollo.FakeClock) service {
			b := newBus(t, c)
			return must[*stream.Hub](t)(stream.New(stream.Options{Bus: b, Clock: c,
				Changes: func(n int) stream.ChangeSubscription { return b.Subscribe(n) }}))
		}},
		{"metrics aggregator", mod + "metrics", true, func(t *testing.T, c *apollo.FakeClock) service { return newAggregator(t, c) }},
		{"alert engine", mod + "alert", false, func(t *testing.T, c *apollo.FakeClock) service {
			return must[*alert.Engine](t)(alert.New(alert.Options{Store: newAggregator(t, c), Sender: nopSender{}, Clock: c}))
		}},
		{"alert loader", mod + "alert", true, func(t *testing.T, c *apollo.FakeClock) service {
			path := filepath.Join(t.TempDir(), "rules.txt")
			os.WriteFile(path, []byte("# apollo: empty\n"), 0o600)
			return must[*alert.Loader](t)(alert.NewLoader(alert.LoaderOptions{Path: path, Clock: c, OnLoad: func(rs []*rules.Rule, src []byte) {}}))
		}},
		{"notify dispatcher", mod + "notify", false, func(t *testing.T, c *apollo.FakeClock) service {
			ops := notify.Channel{Name: "ops", Type: "webhook",
				Notifier: notify.NotifierFunc(func(context.Context, *notify.Message) (bool, error) { return false, nil })}
			return must[*notify.Dispatcher](t)(notify.NewDispatcher([]notify.Channel{ops}, notify.Options{Clock: c}))
		}},
		{"scheduler", mod + "sched", false, func(t *testing.T, c *apollo.FakeClock) service {
			f := must[*sched.File](t)(sched.Parse("jobs.yaml", []byte("jobs:\n  - name: a\n    schedule: \"0 * * * *\"\n    command: [x]\n")))
			return must[*sched.Scheduler](t)(sched.New(f, sched.Options{Clock: c, Reporter: sched.ReporterFunc(func(apollo.Event) error { return nil })}))
		}},
		{"redisstore flusher", mod + "redisstore", true, func(t *testing.T, c *apollo.FakeClock) service {
			rc, prefix := redistest.Client(t)
			return must[*redisstore.Flusher](t)(redisstore.NewFlusher(newAggregator(t, c), redisstore.Options{Client: rc, Prefix: prefix, Clock: c}))
		}},
		{"redisstore lease", mod + "redisstore", false, func(t *testing.T, c *apollo.FakeClock) service {
			rc, prefix := redistest.Client(t)
			return redisstore.NewLease(rc, prefix, "me", time.Minute).WithClock(c)
		}},
		{"redisstore heartbeat", mod + "redisstore", false, func(t *testing.T, c *apollo.FakeClock) service {
			rc, prefix := redistest.Client(t)
			return redisstore.NewHeartbeat(rc, prefix, "bus", "me", time.Minute).WithClock(c)
		}},
		{"redisstore keeper", mod + "redisstore", false, func(t *testing.T, c *apollo.FakeClock) service {
			rc, prefix := redistest.Client(t)
			return redisstore.NewKeeper(rc, prefix, "me", time.Minute, slog.New(slog.DiscardHandler), func(context.Context) error { return nil }).WithClock(c)
		}},
		{"redisstore change feed", mod + "redisstore", false, func(t *testing.T, c *apollo.FakeClock) service {
			rc, prefix := redistest.Client(t)
			return redisstore.NewChangeFeed(rc, prefix, nil).WithClock(c)
		}},
		{"cluster node", mod + "cluster", false, func(t *testing.T, c *apollo.FakeClock) service {
			nc := connectNATS(t)
			return must[*cluster.Node](t)(cluster.New(cluster.Options{Conn: nc, NodeID: "n1", Partitions: 2, Clock: c}))
		}},
	}
}

func connectNATS(t *testing.T) *nats.Conn {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(testwait.Timeout(t)) {
		t.Fatal("the embedded NATS server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func start(t *testing.T, c component) (service, *apollo.FakeClock) {
	t.Helper()
	clock := apollo.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s := c.make(t, clock)
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s, clock
}

// Start once: a second Start is an error that says so; a Start after
// Stop is one too, unless the component restarts.
func TestComponentsStartOnce(t *testing.T) {
	for _, c := range components(t) {
		t.Run(c.name, func(t *testing.T) {
			s, _ := start(t, c)
			if err := s.Start(context.Background()); !errors.Is(err, lifecycle.ErrStarted) || !strings.Contains(err.Error(), "already started") {
				t.Errorf("second Start: %v", err)
			}
			if err := s.Stop(testwait.Context(t)); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			err := s.Start(context.Background())
			switch {
			case c.restarts && err != nil:
				t.Errorf("Start after Stop of a component that restarts: %v", err)
			case !c.restarts && !errors.Is(err, lifecycle.ErrStopped):
				t.Errorf("Start after Stop: %v, want lifecycle.ErrStopped", err)
			}
		})
	}
}

// Stop with a context already done does not wait and says why; a later
// Stop finishes the job.
func TestComponentsStopExpiredContext(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range components(t) {
		t.Run(c.name, func(t *testing.T) {
			s, _ := start(t, c)
			if err := s.Stop(done); !errors.Is(err, context.Canceled) {
				t.Errorf("Stop with a cancelled context: %v, want context.Canceled", err)
			}
			if err := s.Stop(testwait.Context(t)); err != nil {
				t.Errorf("the Stop after: %v", err)
			}
		})
	}
}

// Stop waits for the goroutines: once it returns, no goroutine runs code
// of the component's package. The check reads the goroutines' stacks
// once, right after Stop returned: no sleep, no retry.
func TestComponentsStopWaits(t *testing.T) {
	for _, c := range components(t) {
		t.Run(c.name, func(t *testing.T) {
			s, clock := start(t, c)
			if n := owned(c.pkg); n == 0 {
				t.Fatalf("no goroutine of %s runs after Start", c.pkg)
			}
			if err := s.Stop(testwait.Context(t)); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if n := ours(c.pkg); n != 0 {
				t.Errorf("%d goroutines of %s still run after Stop returned:\n%s", n, c.pkg, stacks(c.pkg))
			}
			if n := clock.Waiters(); n != 0 {
				t.Errorf("%d timers of the fake clock still armed after Stop", n)
			}
		})
	}
}

// owned counts the goroutines running code of pkg or started by a
// lifecycle.Group (the subtests run one at a time: the group is the
// component's). A Tick loop waits in the group's code.
func owned(pkg string) int {
	n := 0
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if hasFrame(g, pkg) || strings.Contains(g, "\ncreated by github.com/apollo-11/apollo/internal/lifecycle.(*Group).Go") {
			n++
		}
	}
	return n
}

// ours counts the goroutines with a frame of pkg (its functions, not
// those of its subpackages or tests) on their stack. A goroutine of a
// lifecycle.Group that has returned from the component's function but
// not yet exited has none.
func ours(pkg string) int {
	n := 0
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if hasFrame(g, pkg) {
			n++
		}
	}
	return n
}

func stacks(pkg string) string {
	var out []string
	for _, g := range strings.Split(allStacks(), "\n\n") {
		if hasFrame(g, pkg) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func hasFrame(g, pkg string) bool {
	for _, line := range strings.Split(g, "\n") {
		if rest, ok := strings.CutPrefix(line, pkg+"."); ok && !strings.HasPrefix(rest, "Test") {
			return true
		}
	}
	return false
}

func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}
