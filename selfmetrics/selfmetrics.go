package selfmetrics

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/apollo-11/apollo"
)

// Figurer is a component's stats: a value that writes its figures.
type Figurer interface {
	Figures(w apollo.FigureWriter)
}

// Part is one component of a process.
type Part struct {
	// Name is the part's key in GET /api/v1/system: "bus", "wal", ...
	Name string
	read func(tenant string) Figurer
}

// Watch makes a part of a component whose stats read returns. read is
// called at every scrape and every GET /api/v1/system: the component's
// counters are the only ones, so the two can never disagree. The caller
// watches only the components it runs. Every tenant sees the same stats:
// they must be counts over every tenant that name nothing of a tenant's.
func Watch[S Figurer](name string, read func() S) Part {
	return Part{Name: name, read: func(string) Figurer { return read() }}
}

// WatchFor is Watch for a component whose stats name things that belong
// to tenants (notification channels): read returns what the caller's
// tenant may see of them. Tenant "" is the default tenant, the
// operators' (docs/security.md).
func WatchFor[S Figurer](name string, read func(tenant string) S) Part {
	return Part{Name: name, read: func(tenant string) Figurer { return read(tenant) }}
}

// Stats reads the part's stats as tenant may see them, for
// GET /api/v1/system.
func (p Part) Stats(tenant string) any { return p.read(tenant) }

// Parts are the components of one process, in no particular order.
type Parts []Part

// System are the parts by name, for GET /api/v1/system: each reads its
// stats, as the tenant may see them, when called.
func (ps Parts) System() map[string]func(tenant string) any {
	m := make(map[string]func(string) any, len(ps))
	for _, p := range ps {
		m[p.Name] = p.Stats
	}
	return m
}

// Handler serves GET /metrics: every part's figures as the tenant that
// tenantOf finds behind the request may see them (nil: every request is
// the default tenant's), and the Go runtime's and the process's
// collectors. A failed write to the scraper goes to log.
func (ps Parts) Handler(log *slog.Logger, tenantOf func(*http.Request) string) http.Handler {
	var handlers sync.Map // tenant -> http.Handler; tenants are the configured tokens', a few
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := ""
		if tenantOf != nil {
			tenant = tenantOf(r)
		}
		h, ok := handlers.Load(tenant)
		if !ok {
			h, _ = handlers.LoadOrStore(tenant, ps.handlerFor(log, tenant))
		}
		h.(http.Handler).ServeHTTP(w, r)
	})
}

func (ps Parts) handlerFor(log *slog.Logger, tenant string) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&collector{parts: ps, tenant: tenant})
	return promhttp.HandlerFor(prometheus.Gatherers{runtimeRegistry(), reg}, promhttp.HandlerOpts{
		ErrorLog:      promLogger{log},
		ErrorHandling: promhttp.ContinueOnError, // a partial scrape beats none
	})
}

// runtimeRegistry holds the Go runtime and process collectors. They
// describe the process, so every handler shares them.
var runtimeRegistry = sync.OnceValue(func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
})

// promLogger sends promhttp's errors (a failed write to the scraper, a
// collector error) to the process's log.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("metrics scrape", "err", fmt.Sprint(v...)) }

// collector is a prometheus.Collector of the parts' figures, as tenant
// may see them. It is unchecked (it describes nothing ahead): which
// series a family has, such as one per notification channel, is known
// only from the stats.
type collector struct {
	parts  Parts
	tenant string
}

// descs are the families' descriptors, made once: a family is a package
// variable of its component, the same for every collector.
var descs sync.Map // *apollo.Family -> *prometheus.Desc

func (c *collector) Describe(chan<- *prometheus.Desc) {}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	w := writer{c: c, ch: ch}
	for _, p := range c.parts {
		p.read(c.tenant).Figures(&w)
	}
}

// desc is the family's descriptor, made once.
func (c *collector) desc(f *apollo.Family) *prometheus.Desc {
	if d, ok := descs.Load(f); ok {
		return d.(*prometheus.Desc)
	}
	d, _ := descs.LoadOrStore(f, prometheus.NewDesc(f.Name, f.Help, f.Labels, nil))
	return d.(*prometheus.Desc)
}

// writer turns figures into Prometheus samples during one Collect.
type writer struct {
	c  *collector
	ch chan<- prometheus.Metric
}

var valueTypes = map[apollo.FigureKind]prometheus.ValueType{apollo.FigureCounter: prometheus.CounterValue, apollo.FigureGauge: prometheus.GaugeValue}

func (w *writer) Add(f *apollo.Family, v float64, labelValues ...string) {
	t, ok := valueTypes[f.Kind]
	if !ok {
		w.ch <- prometheus.NewInvalidMetric(w.c.desc(f), fmt.Errorf("%s: Add on a family of kind %d; summaries take AddSummary", f.Name, f.Kind))
		return
	}
	w.ch <- prometheus.MustNewConstMetric(w.c.desc(f), t, v, labelValues...)
}

func (w *writer) AddSummary(f *apollo.Family, count uint64, sum float64) {
	w.ch <- prometheus.MustNewConstSummary(w.c.desc(f), count, sum, nil)
}

// Recovery is the start-up recovery of a process with a data directory:
// the newest snapshot loaded, then the log replayed after it. Watched as
// a part, it must be filled before the process serves; it is only read
// after.
type Recovery struct {
	Duration time.Duration // snapshot load and replay together
	Events   int64         // log records replayed after the snapshot
}

var (
	figRecoverySeconds = &apollo.Family{Name: "apollo_recovery_seconds", Kind: apollo.FigureGauge,
		Help: "Time the start-up recovery took: snapshot load and log replay."}
	figRecoveryEvents = &apollo.Family{Name: "apollo_recovery_events", Kind: apollo.FigureGauge,
		Help: "Log records replayed at start-up after the snapshot."}
)

// Figures writes the recovery's figures.
func (r Recovery) Figures(w apollo.FigureWriter) {
	w.Add(figRecoverySeconds, r.Duration.Seconds())
	w.Add(figRecoveryEvents, float64(r.Events))
}

// MarshalJSON is the recovery as GET /api/v1/system shows it.
func (r Recovery) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Seconds float64 `json:"seconds"`
		Events  int64   `json:"events"`
	}{r.Duration.Seconds(), r.Events})
}

// Checkpoint is the latest checkpoint of a process with a data directory:
// decisions pause while the state is copied into memory, then the copy is
// written to disk without holding anything up.
type Checkpoint struct {
	Taken uint64        // checkpoints taken since the start
	Pause time.Duration // how long the latest held decisions
	Write time.Duration // how long the latest took to reach the disk after
	Bytes int64         // the latest snapshot's size
	Tasks int64         // tasks in memory when it was taken
	At    time.Time     // when the latest was taken
}

var (
	figCheckpoints = &apollo.Family{Name: "apollo_checkpoints_total", Kind: apollo.FigureCounter,
		Help: "Checkpoints (snapshots of the state) taken since the start."}
	figCheckpointPause = &apollo.Family{Name: "apollo_checkpoint_pause_seconds", Kind: apollo.FigureGauge,
		Help: "How long the latest checkpoint held every decision (ingest waits) while it copied the state."}
	figCheckpointWrite = &apollo.Family{Name: "apollo_checkpoint_write_seconds", Kind: apollo.FigureGauge,
		Help: "How long the latest checkpoint took to write its copy to disk, after the pause."}
	figCheckpointBytes = &apollo.Family{Name: "apollo_checkpoint_bytes", Kind: apollo.FigureGauge,
		Help: "Size of the latest snapshot."}
)

// Figures writes the checkpoint's figures.
func (c Checkpoint) Figures(w apollo.FigureWriter) {
	w.Add(figCheckpoints, float64(c.Taken))
	w.Add(figCheckpointPause, c.Pause.Seconds())
	w.Add(figCheckpointWrite, c.Write.Seconds())
	w.Add(figCheckpointBytes, float64(c.Bytes))
}

// MarshalJSON is the checkpoint as GET /api/v1/system shows it.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Taken        uint64    `json:"taken"`
		PauseSeconds float64   `json:"pauseSeconds"`
		WriteSeconds float64   `json:"writeSeconds"`
		Bytes        int64     `json:"bytes"`
		At           time.Time `json:"at"`
	}{c.Taken, c.Pause.Seconds(), c.Write.Seconds(), c.Bytes, c.At})
}
