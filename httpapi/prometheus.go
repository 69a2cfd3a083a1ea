package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/notify"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/sched"
	"github.com/apollo-11/apollo/wal"
)

// GET /metrics serves Apollo-11's own counters in the Prometheus text
// format (docs/monitoring.md). Nothing here counts anything: at each
// scrape the collector reads the Stats() of every component the server
// was given, so the hot paths keep the atomic counters they already have
// and /metrics, GET /api/v1/system and the System page can never disagree.

// Monitored are the components whose counters GET /metrics reports besides
// the bus (Options.Bus) and the stream (Options.Stream). A nil field, or
// one holding a nil pointer, is not reported: each process sets what it
// runs (the alert process has no WAL, the bus process no alert engine).
type Monitored struct {
	WAL           interface{ Stats() wal.Stats }
	Metrics       interface{ Stats() metrics.Stats }
	Notifications interface{ Stats() notify.Stats }
	Alerts        interface{ Stats() alert.Stats }
	Scheduler     interface{ Stats() sched.Stats }
	Redis         interface{ Stats() redisstore.Stats } // the metrics flusher
	// Recovery is what the process measured while it recovered at start.
	// It must be filled before the server serves; it is only read after.
	Recovery *Recovery
}

// Recovery is the start-up recovery of a process with a data directory:
// the newest snapshot loaded, then the log replayed after it.
type Recovery struct {
	Duration time.Duration // snapshot load and replay together
	Events   int64         // log records replayed after the snapshot
}

// prometheus serves GET /metrics. Viewers may scrape: the numbers are
// totals over every tenant and carry no job, task or tenant name.
func (s *Server) prometheus(w http.ResponseWriter, r *http.Request, _ *Principal) error {
	// A registry made per scrape keeps the Server free of state; a scrape
	// then takes ~1.2 ms instead of ~1.0 ms with a kept one
	// (BenchmarkScrape), nothing at one scrape every few seconds. The
	// runtime collectors are process-wide and registered once.
	reg := prometheus.NewRegistry()
	if err := reg.Register(s.collector()); err != nil {
		return fmt.Errorf("metrics: registering the collector: %w", err)
	}
	h := promhttp.HandlerFor(prometheus.Gatherers{runtimeRegistry(), reg}, promhttp.HandlerOpts{
		ErrorLog:      promLogger{s.log},
		ErrorHandling: promhttp.ContinueOnError, // a partial scrape beats none
	})
	h.ServeHTTP(w, r)
	return nil
}

// runtimeRegistry holds the Go runtime and process collectors. They
// describe the process, not a Server, so every Server shares them.
var runtimeRegistry = sync.OnceValue(func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
})

// promLogger sends promhttp's errors (a failed write to the scraper, a
// collector error) to the server's log.
type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("metrics scrape", "err", fmt.Sprint(v...)) }

// collector returns a collector over the components this server was given.
func (s *Server) collector() *selfCollector {
	var c selfCollector
	if b, ok := s.opts.Bus.(interface{ Stats() bus.Stats }); ok && present(b) {
		watch(&c, b.Stats, busFamilies)
	}
	if s.opts.Stream != nil {
		watch(&c, s.opts.Stream.Stats, streamFamilies)
	}
	m := s.opts.Monitored
	if present(m.WAL) {
		watch(&c, m.WAL.Stats, walFamilies)
	}
	if present(m.Metrics) {
		watch(&c, m.Metrics.Stats, metricsFamilies)
	}
	if present(m.Notifications) {
		watch(&c, m.Notifications.Stats, notifyFamilies)
	}
	if present(m.Alerts) {
		watch(&c, m.Alerts.Stats, alertFamilies)
	}
	if present(m.Scheduler) {
		watch(&c, m.Scheduler.Stats, schedFamilies)
	}
	if present(m.Redis) {
		watch(&c, m.Redis.Stats, redisFamilies)
	}
	if m.Recovery != nil {
		rec := *m.Recovery
		watch(&c, func() Recovery { return rec }, recoveryFamilies)
	}
	return &c
}

// present is false for a nil interface and for one holding a nil pointer:
// a process passing its *sched.Scheduler, nil when the scheduler is off,
// must not make every scrape panic.
func present(v any) bool {
	if v == nil {
		return false
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() != reflect.Pointer || !rv.IsNil()
}

// selfCollector is a prometheus.Collector over components' Stats().
type selfCollector struct{ parts []part }

var _ prometheus.Collector = (*selfCollector)(nil)

func (c *selfCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, p := range c.parts {
		p.describe(ch)
	}
}

func (c *selfCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.parts {
		p.collect(ch)
	}
}

// part is one component: its Stats() read once per scrape, and the
// metric families made from them.
type part interface {
	describe(ch chan<- *prometheus.Desc)
	collect(ch chan<- prometheus.Metric)
}

type source[S any] struct {
	stats    func() S
	families []family[S]
}

// watch adds a component to c: the generic twin of a method, which Go
// does not have; it ties a Stats func to the families of its type.
func watch[S any](c *selfCollector, stats func() S, families []family[S]) {
	c.parts = append(c.parts, source[S]{stats, families})
}

func (s source[S]) describe(ch chan<- *prometheus.Desc) {
	for _, f := range s.families {
		ch <- f.desc
	}
}

func (s source[S]) collect(ch chan<- prometheus.Metric) {
	st := s.stats()
	for _, f := range s.families {
		f.collect(st, f.desc, ch)
	}
}

// family is one metric family read from a component's stats S.
type family[S any] struct {
	name, help, kind string // kept for the docs test; the desc has no getters
	desc             *prometheus.Desc
	collect          func(s S, d *prometheus.Desc, ch chan<- prometheus.Metric)
}

// put emits one sample of a labelled family, label values in the order the
// family declares its labels.
type put func(v float64, labelValues ...string)

func counter[S any](name, help string, v func(S) float64) family[S] {
	return scalar(name, help, prometheus.CounterValue, v)
}

func gauge[S any](name, help string, v func(S) float64) family[S] {
	return scalar(name, help, prometheus.GaugeValue, v)
}

func scalar[S any](name, help string, t prometheus.ValueType, v func(S) float64) family[S] {
	return family[S]{name: name, help: help, kind: typeName(t), desc: prometheus.NewDesc(name, help, nil, nil),
		collect: func(s S, d *prometheus.Desc, ch chan<- prometheus.Metric) {
			ch <- prometheus.MustNewConstMetric(d, t, v(s))
		}}
}

func counterBy[S any](name, help string, labels []string, each func(S, put)) family[S] {
	return vector(name, help, prometheus.CounterValue, labels, each)
}

func gaugeBy[S any](name, help string, labels []string, each func(S, put)) family[S] {
	return vector(name, help, prometheus.GaugeValue, labels, each)
}

func vector[S any](name, help string, t prometheus.ValueType, labels []string, each func(S, put)) family[S] {
	return family[S]{name: name, help: help, kind: typeName(t), desc: prometheus.NewDesc(name, help, labels, nil),
		collect: func(s S, d *prometheus.Desc, ch chan<- prometheus.Metric) {
			each(s, func(v float64, lv ...string) { ch <- prometheus.MustNewConstMetric(d, t, v, lv...) })
		}}
}

func typeName(t prometheus.ValueType) string {
	if t == prometheus.CounterValue {
		return "counter"
	}
	return "gauge"
}

// summary is a summary without quantiles: the _count and _sum that the
// component keeps, from which PromQL derives the mean over any range.
func summary[S any](name, help string, v func(S) (count uint64, sum float64)) family[S] {
	return family[S]{name: name, help: help, kind: "summary", desc: prometheus.NewDesc(name, help, nil, nil),
		collect: func(s S, d *prometheus.Desc, ch chan<- prometheus.Metric) {
			n, sum := v(s)
			ch <- prometheus.MustNewConstSummary(d, n, sum, nil)
		}}
}

// unixSeconds is a timestamp gauge's value; 0 stands for "never", so that
// `time() - x > N` alerts on a component that never did the thing.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// The families below are the whole metric surface; docs/monitoring.md
// describes each, and TestMonitoringDocCoversEveryMetric keeps it so.

var busFamilies = []family[bus.Stats]{
	counterBy("apollo_events_total",
		"Events decided by the bus since start, replayed log records included, by result: accepted (applied; held and waited ones too), duplicate, illegal (transition not allowed), invalid, refused (answered retry_later: not stored).",
		[]string{"result"}, func(s bus.Stats, put put) {
			put(float64(s.Accepted), "accepted")
			put(float64(s.Duplicate), "duplicate")
			put(float64(s.Illegal), "illegal")
			put(float64(s.Invalid), "invalid")
			put(float64(s.Refused), "refused")
		}),
	counter("apollo_events_held_total", "Accepted events whose task queue was full, so their change waited in the holding area.",
		func(s bus.Stats) float64 { return float64(s.Held) }),
	counter("apollo_events_waiting_total", "Events answered waiting: ahead of a missing earlier event of their task and not legal without it.",
		func(s bus.Stats) float64 { return float64(s.Parked) }),
	counter("apollo_events_wait_ended_total", "Waiting events applied when the reorder window ended without the missing earlier events; the task's history marks the gap.",
		func(s bus.Stats) float64 { return float64(s.WaitEnded) }),
	counter("apollo_timeouts_written_total", "Timeout records the bus wrote itself for running tasks past their deadline.",
		func(s bus.Stats) float64 { return float64(s.Timeouts) }),
	counter("apollo_missed_starts_total", "Missed-start records the bus wrote for pending tasks that did not start in time.",
		func(s bus.Stats) float64 { return float64(s.MissedStart) }),
	counter("apollo_corrections_total", "Manual status corrections by operators.",
		func(s bus.Stats) float64 { return float64(s.Corrections) }),
	counter("apollo_tasks_evicted_total", "Tasks moved out of memory after their retention.",
		func(s bus.Stats) float64 { return float64(s.Evicted) }),
	counter("apollo_log_errors_total", "Records the bus failed to append to the log; their events were answered retry_later.",
		func(s bus.Stats) float64 { return float64(s.LogErrors) }),
	counter("apollo_bus_subscribers_cut_total", "Subscribers (stream hub, Redis publisher) cut off for not keeping up.",
		func(s bus.Stats) float64 { return float64(s.SubscribersCut) }),
	gauge("apollo_tasks", "Tasks in memory.", func(s bus.Stats) float64 { return float64(s.Tasks) }),
	gauge("apollo_queue_tasks", "Tasks with changes waiting for the observers (metrics, alerting, stream).",
		func(s bus.Stats) float64 { return float64(s.Queues) }),
	gauge("apollo_queue_changes", "Changes waiting for the observers, the holding area included.",
		func(s bus.Stats) float64 { return float64(s.Queued) }),
	gauge("apollo_holding_area_changes", "Changes in the holding area: over their task's queue length.",
		func(s bus.Stats) float64 { return float64(s.Holding) }),
	gauge("apollo_holding_area_limit", "Changes the holding area takes before events are refused.",
		func(s bus.Stats) float64 { return float64(s.HoldLimit) }),
	gauge("apollo_out_of_order_waiting", "Out-of-order events waiting now for the events before them.",
		func(s bus.Stats) float64 { return float64(s.Waiting) }),
	gauge("apollo_tombstones", "Tasks gone from memory whose last sequence is kept to recognise late duplicates.",
		func(s bus.Stats) float64 { return float64(s.Tombstones) }),
	gauge("apollo_deadlines", "Timeout, missed-start and reorder deadlines armed.",
		func(s bus.Stats) float64 { return float64(s.Deadlines) }),
	gauge("apollo_bus_subscribers", "Subscribers to the bus's changes.",
		func(s bus.Stats) float64 { return float64(s.Subscribers) }),
}

var streamFamilies = []family[HubStats]{
	gauge("apollo_stream_clients", "WebSocket clients of GET /api/v1/stream connected now.",
		func(s HubStats) float64 { return float64(s.Clients) }),
	gauge("apollo_stream_groups", "Distinct subscriptions (tenant and filter) the stream serves now.",
		func(s HubStats) float64 { return float64(s.Groups) }),
	counter("apollo_stream_changes_total", "Changes the stream received from the bus.",
		func(s HubStats) float64 { return float64(s.Changes) }),
	counter("apollo_stream_messages_total", "Messages written to stream clients.",
		func(s HubStats) float64 { return float64(s.Messages) }),
	counter("apollo_stream_resyncs_total", "Times the bus cut the stream off for being slow; every client resynchronised from a snapshot.",
		func(s HubStats) float64 { return float64(s.Resyncs) }),
	counter("apollo_stream_snapshots_total", "Snapshots sent to stream clients.",
		func(s HubStats) float64 { return float64(s.Snapshots) }),
	counter("apollo_stream_resumes_total", "Subscriptions resumed from the stream's ring buffer without a snapshot.",
		func(s HubStats) float64 { return float64(s.Resumes) }),
	counterBy("apollo_stream_connections_total", "WebSocket connections, by result: accepted, or refused (shutting down, origin not allowed).",
		[]string{"result"}, func(s HubStats, put put) {
			put(float64(s.Accepted), "accepted")
			put(float64(s.Refused), "refused")
		}),
	counterBy("apollo_stream_closed_total", "Stream clients closed by the server, by reason: too_slow (fell behind and were dropped), no_pong, shutdown.",
		[]string{"reason"}, func(s HubStats, put put) {
			put(float64(s.ClosedSlow), "too_slow")
			put(float64(s.ClosedNoPong), "no_pong")
			put(float64(s.ClosedShutdown), "shutdown")
		}),
}

var walFamilies = []family[wal.Stats]{
	counter("apollo_wal_appends_total", "Records appended to the write-ahead log since open.",
		func(s wal.Stats) float64 { return float64(s.Appends) }),
	counter("apollo_wal_bytes_total", "Bytes appended to the write-ahead log since open, record headers included.",
		func(s wal.Stats) float64 { return float64(s.Bytes) }),
	summary("apollo_wal_sync_seconds", "Time spent in fsync of log segments; _count is the number of fsyncs.",
		func(s wal.Stats) (uint64, float64) { return s.Syncs, s.SyncLatencySum.Seconds() }),
	gauge("apollo_wal_sync_last_seconds", "Duration of the latest fsync.",
		func(s wal.Stats) float64 { return s.SyncLatencyLast.Seconds() }),
	gauge("apollo_wal_sync_max_seconds", "Longest fsync since open.",
		func(s wal.Stats) float64 { return s.SyncLatencyMax.Seconds() }),
	gauge("apollo_wal_segments", "Segment files of the log on disk.",
		func(s wal.Stats) float64 { return float64(s.Segments) }),
	gauge("apollo_wal_repaired_bytes", "Bytes cut from a torn tail when the log was opened.",
		func(s wal.Stats) float64 { return float64(s.Repaired) }),
	gauge("apollo_wal_last_lsn", "Sequence number of the last record appended.",
		func(s wal.Stats) float64 { return float64(s.LastLSN) }),
	gauge("apollo_wal_durable_lsn", "Sequence number up to which the log is durable.",
		func(s wal.Stats) float64 { return float64(s.DurableLSN) }),
}

var metricsFamilies = []family[metrics.Stats]{
	gauge("apollo_metrics_jobs", "Jobs with metrics in memory, over every tenant.",
		func(s metrics.Stats) float64 { return float64(s.Names) }),
	gauge("apollo_metrics_buckets", "10-second buckets held.", func(s metrics.Stats) float64 { return float64(s.Buckets) }),
	gauge("apollo_metrics_rollups", "1-minute rollups held.", func(s metrics.Stats) float64 { return float64(s.Rollups) }),
	gauge("apollo_metrics_memory_bytes", "Estimated memory held by the metrics aggregator.",
		func(s metrics.Stats) float64 { return float64(s.Bytes) }),
	counterBy("apollo_metrics_changes_dropped_total", "Changes not counted in metrics, by reason: too_old (before the rollup retention), too_new (over a minute ahead of the clock).",
		[]string{"reason"}, func(s metrics.Stats, put put) {
			put(float64(s.TooOld), "too_old")
			put(float64(s.TooNew), "too_new")
		}),
}

var alertFamilies = []family[alert.Stats]{
	counter("apollo_rule_evaluations_total", "Evaluation cycles of the rate rules.",
		func(s alert.Stats) float64 { return float64(s.Evaluations) }),
	counter("apollo_rule_evaluation_errors_total", "Evaluation cycles in which some metrics could not be read.",
		func(s alert.Stats) float64 { return float64(s.EvaluationErrors) }),
	gauge("apollo_rule_evaluation_seconds", "Wall time of the latest evaluation cycle.",
		func(s alert.Stats) float64 { return s.LastDuration.Seconds() }),
	gauge("apollo_rule_last_evaluation_timestamp_seconds", "When the latest evaluation cycle ran, Unix seconds; 0 before the first.",
		func(s alert.Stats) float64 { return unixSeconds(s.LastEvaluation) }),
	gaugeBy("apollo_rules", "Rules loaded, by kind: rate (evaluated every interval) or event (on each matching event).",
		[]string{"kind"}, func(s alert.Stats, put put) {
			put(float64(s.RateRules), "rate")
			put(float64(s.EventRules), "event")
		}),
	gaugeBy("apollo_alerts", "Alerts held, by state (resolved ones are kept a while for the API).",
		[]string{"state"}, putAlertStates),
	counterBy("apollo_alert_notifications_total", "Notifications of the alert engine, by result: sent (handed to the dispatcher), deduplicated (held the dedup lock elsewhere), silenced, dropped (event-rule queue full).",
		[]string{"result"}, func(s alert.Stats, put put) {
			put(float64(s.Sent), "sent")
			put(float64(s.Deduped), "deduplicated")
			put(float64(s.Silenced), "silenced")
			put(float64(s.Dropped), "dropped")
		}),
	counter("apollo_alert_lock_errors_total", "Notifications sent without the dedup lock because taking it failed.",
		func(s alert.Stats) float64 { return float64(s.LockErrors) }),
	counter("apollo_alert_state_save_errors_total", "Failed saves of the alert state.",
		func(s alert.Stats) float64 { return float64(s.SaveErrors) }),
}

// alertStates are reported even at zero, so a firing-alerts panel or rule
// has a series before the first alert.
var alertStates = []apollo.AlertState{apollo.AlertInactive, apollo.AlertPending, apollo.AlertFiring, apollo.AlertResolved}

func putAlertStates(s alert.Stats, put put) {
	for _, st := range alertStates {
		put(float64(s.Alerts[st]), string(st))
	}
	for st, n := range s.Alerts {
		if !slices.Contains(alertStates, st) {
			put(float64(n), string(st))
		}
	}
}

var notifyFamilies = []family[notify.Stats]{
	counterBy("apollo_notifications_total", "Delivery outcomes by channel: sent, failed (not retried), retrying, gave_up, dropped (never tried), coalesced (folded into a digest).",
		[]string{"channel", "outcome"}, func(s notify.Stats, put put) {
			for name, c := range s.Channels {
				put(float64(c.Sent), name, notify.OutcomeSent)
				put(float64(c.Failed), name, notify.OutcomeFailed)
				put(float64(c.Retried), name, notify.OutcomeRetrying)
				put(float64(c.GaveUp), name, notify.OutcomeGaveUp)
				put(float64(c.Dropped), name, notify.OutcomeDropped)
				put(float64(c.Coalesced), name, notify.OutcomeCoalesced)
			}
		}),
	counterBy("apollo_notifications_queued_total", "Notifications accepted into a channel's queue.",
		[]string{"channel"}, func(s notify.Stats, put put) {
			for name, c := range s.Channels {
				put(float64(c.Queued), name)
			}
		}),
	gaugeBy("apollo_notifications_waiting", "Notifications waiting in a channel's queue now.",
		[]string{"channel"}, func(s notify.Stats, put put) {
			for name, c := range s.Channels {
				put(float64(c.QueueLen), name)
			}
		}),
	counter("apollo_notifications_unknown_channel_total", "Notifications dropped because they named a channel that is not configured.",
		func(s notify.Stats) float64 { return float64(s.UnknownChannel) }),
}

var schedFamilies = []family[sched.Stats]{
	counter("apollo_scheduler_runs_total", "Runs the scheduler started.", func(s sched.Stats) float64 { return float64(s.Runs) }),
	counter("apollo_scheduler_skipped_total", "Runs not started and reported manual_blocked instead: job paused, previous run still running, upstream not successful, or shutting down.",
		func(s sched.Stats) float64 { return float64(s.Skipped) }),
	counter("apollo_scheduler_missed_total", "Catch-up ticks dropped by catchup: skip.",
		func(s sched.Stats) float64 { return float64(s.Missed) }),
	counter("apollo_scheduler_report_errors_total", "Events the scheduler failed to report; the jobs run on regardless.",
		func(s sched.Stats) float64 { return float64(s.ReportErrors) }),
	counter("apollo_scheduler_state_errors_total", "Failed reads or writes of the scheduler's state file.",
		func(s sched.Stats) float64 { return float64(s.StateErrors) }),
}

var redisFamilies = []family[redisstore.Stats]{
	counter("apollo_redis_flushes_total", "Flushes of metrics to Redis, good or not.",
		func(s redisstore.Stats) float64 { return float64(s.Flushes) }),
	counter("apollo_redis_errors_total", "Flushes of metrics to Redis that failed; the changes are kept and retried.",
		func(s redisstore.Stats) float64 { return float64(s.Failures) }),
	counter("apollo_redis_full_copies_total", "Flushes that copied every job: at start, and after the dirty set overflowed.",
		func(s redisstore.Stats) float64 { return float64(s.FullCopies) }),
	counter("apollo_redis_commands_total", "Redis commands sent by good flushes.",
		func(s redisstore.Stats) float64 { return float64(s.Commands) }),
	counter("apollo_redis_job_writes_total", "Job writes made by flushes.",
		func(s redisstore.Stats) float64 { return float64(s.Jobs) }),
	gauge("apollo_redis_dirty_jobs", "Jobs with changes waiting for the next flush.",
		func(s redisstore.Stats) float64 { return float64(s.Dirty) }),
	gauge("apollo_redis_last_flush_timestamp_seconds", "End of the last good flush, Unix seconds; 0 before the first.",
		func(s redisstore.Stats) float64 { return unixSeconds(s.LastFlush) }),
}

var recoveryFamilies = []family[Recovery]{
	gauge("apollo_recovery_seconds", "Time the start-up recovery took: snapshot load and log replay.",
		func(r Recovery) float64 { return r.Duration.Seconds() }),
	gauge("apollo_recovery_events", "Log records replayed at start-up after the snapshot.",
		func(r Recovery) float64 { return float64(r.Events) }),
}
