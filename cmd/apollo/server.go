package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/loglimit"
	"github.com/apollo-11/apollo/internal/sourcefile"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/sched"
	"github.com/apollo-11/apollo/selfmetrics"
	"github.com/apollo-11/apollo/stream"
	"github.com/apollo-11/apollo/wal"
	"github.com/apollo-11/apollo/web"
)

// serverDeps are what runServer takes from its caller besides the config.
type serverDeps struct {
	log   *slog.Logger
	out   io.Writer         // where the start-up banner goes
	clock apollo.Clock      // nil: the system clock
	ready func(addr string) // called with the listening address once serving
	// redis, when set, makes this the bus of the three-process mode.
	redis redis.UniversalClient
}

// server is the all-in-one process, assembled.
type server struct {
	cfg      config.Config
	tls      *tls.Config // the certificate tls: names, read at start; nil without
	log      *slog.Logger
	clock    apollo.Clock
	console  io.Writer // where console channels write
	wal      *wal.Log
	snaps    *snapCadence // snapshots by records logged (snapshot_events)
	snapBuf  snapshotBuffer
	lastCkpt atomic.Pointer[selfmetrics.Checkpoint] // nil until the first
	bus      *bus.Bus
	conns    *httpapi.ConnLimit // the API's listener
	agg      *metrics.Aggregator
	hub      *stream.Hub
	alerts   alertSide
	recovery selfmetrics.Recovery // measured at start, for /metrics
	// seqReplay replays the log on one goroutine (bus.Replay) instead of
	// a parallel bus.Replayer: BenchmarkServerRecovery compares the two.
	seqReplay bool
	jobs      *sched.File      // nil without --jobs
	sched     *sched.Scheduler // nil without --jobs
	reporter  *agent.Client    // the scheduler's; nil without --jobs
	// schedToken is the in-process scheduler's token when the server has
	// tokens (made at start, kept only in memory).
	schedToken string
	deadman    *deadman // nil without deadman.url
	expect     *expectations
	arch       *bus.FileArchive
	audit      *audit.Log
	auth       httpapi.Authenticator
	http       *http.Server
	ready      chan struct{}
	stop       chan struct{} // closed at shutdown: background loops end
	fatal      chan error    // the log failed: shut down and exit non-zero
	wg         sync.WaitGroup

	// jobsExpectMu makes each reading of the scheduler's expectations and
	// their putting in force one step, so that of a pause and a resume
	// at once the view put in force last is the newest.
	jobsExpectMu sync.Mutex

	// api is built after the hub starts, whose system messages read it
	// from another goroutine.
	api atomic.Pointer[httpapi.Server]
}

// warnConfig logs what in a valid configuration is most likely a mistake
// (config.Warnings), once at the start of every process that reads it.
func warnConfig(cfg config.Config, log *slog.Logger) {
	for _, w := range cfg.Warnings() {
		log.Warn("configuration: " + w)
	}
}

// applyCollectorSettings gives the Go collector the configuration's target
// (gc_percent) and soft memory limit (memory_limit_mib), unless GOGC or
// GOMEMLIMIT is set: the environment wins. Every process that keeps the
// task state calls it: apollo server, and apollo bus in both its modes.
func applyCollectorSettings(cfg config.Config) {
	if os.Getenv("GOGC") == "" && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && cfg.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimitMiB << 20)
	}
}

// serveAPI serves srv on ln until it fails or is shut down: over TLS
// when srv has a certificate (loadTLS). Every process with the HTTP API
// serves it this way.
func serveAPI(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// loadTLS reads the certificate and key that tls: names, at start: a
// wrong path or key stops the start with what to fix, before the process
// says it is up. It returns nil without tls:.
func loadTLS(cfg config.Config) (*tls.Config, error) {
	if cfg.TLS.Cert == "" {
		return nil, nil
	}
	// Read as the other files the operator names are, within a bound and
	// only from regular files: tls.LoadX509KeyPair reads whatever it is
	// given to its end (/dev/zero until memory runs out).
	certPEM, err := sourcefile.Read(cfg.TLS.Cert, "TLS certificate", sourcefile.MaxSize)
	var keyPEM []byte
	if err == nil {
		keyPEM, err = sourcefile.Read(cfg.TLS.Key, "TLS key", sourcefile.MaxSize)
	}
	var cert tls.Certificate
	if err == nil {
		cert, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		return nil, fmt.Errorf("tls: reading the certificate %s and its key %s: %w (fix tls.cert and tls.key in the configuration, or remove tls: and end TLS at a proxy, docs/deploy.md)",
			cfg.TLS.Cert, cfg.TLS.Key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, nil
}

// apiScheme is the scheme of the API's address: https when it is served
// with the certificate loadTLS read.
func apiScheme(tlsConfig *tls.Config) string {
	if tlsConfig != nil {
		return "https"
	}
	return "http"
}

// runServer starts everything, serves until ctx is done, then shuts down in
// the order written in docs/architecture.md: stop accepting, drain the
// bus, snapshot, close the log.
func runServer(ctx context.Context, cfg config.Config, d serverDeps) error {
	s := &server{cfg: cfg, log: d.log, clock: d.clock, console: d.out, ready: make(chan struct{}), stop: make(chan struct{}),
		fatal: make(chan error, 1)}
	if s.console == nil {
		s.console = io.Discard
	}
	if s.clock == nil {
		s.clock = apollo.SystemClock
	}
	if err := checkListen(cfg); err != nil {
		return err
	}
	var err error
	if s.tls, err = loadTLS(cfg); err != nil {
		return err
	}
	applyCollectorSettings(cfg)
	warnConfig(cfg, s.log)
	if d.redis != nil {
		s.alerts = newRedisAlerting(d.redis, cfg, s.log, s.clock)
	}
	ln, err := s.start(ctx)
	if err != nil {
		return permissionHint(err, cfg.Data)
	}
	s.deadman = startDeadman(cfg.Deadman, s.mode(), s.clock, s.log)
	s.http = s.httpServer()
	addr := ln.Addr().String()
	if d.out != nil {
		fmt.Fprintf(d.out, apiclient.ReadyPrefix+"%s://%s  (data in %s)\n", apiScheme(s.tls), addr, cfg.Data)
	}
	s.log.Info("serving", "addr", addr, "data", cfg.Data, "fsync", cfg.Fsync)
	if d.ready != nil {
		d.ready(addr)
	}
	return s.serve(ctx, ln)
}

// testHoldLive, set by the tests' TestMain in the process they start, is
// handed every live change before the live observers: it holds some, as a
// worker that has not handed them on yet when the process is killed.
var testHoldLive bus.Observer

// start opens the stores, listens, recovers the state and starts every
// service, in that order. When a step fails, what the steps before it
// opened is closed again, newest first, and the step's error (with what to
// do) is returned: the process exits 1 with it, and a second start finds
// the data directory and the address free.
func (s *server) start(ctx context.Context) (net.Listener, error) {
	var undo undoList
	ln, err := s.startSteps(ctx, &undo)
	if err != nil {
		undo.run()
		return nil, err
	}
	return ln, nil
}

// undoList holds the cleanups of the start-up steps that succeeded. Each
// closes what its step opened, held in the step's own variable.
type undoList []func()

func (u *undoList) add(f func()) { *u = append(*u, f) }

func (u undoList) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

func (s *server) startSteps(ctx context.Context, undo *undoList) (net.Listener, error) {
	if err := s.loadJobs(); err != nil {
		return nil, err
	}
	if err := s.open(undo); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w (is another apollo running? choose another --listen)", s.cfg.Listen, err)
	}
	undo.add(func() { ln.Close() })
	if err := s.newScheduler(ln.Addr().String(), undo); err != nil {
		return nil, err
	}
	limits := connectionLimits(s.cfg.Limits, fileLimit(), s.log)
	s.conns = httpapi.LimitConnections(ln, limits.conns, s.log, s.clock)
	if err := s.recover(); err != nil {
		return nil, err
	}
	b, agg := s.bus, s.agg
	if err := startService(ctx, undo, s.log, "the bus", b); err != nil {
		return nil, err
	}
	if err := startService(ctx, undo, s.log, "the metrics", agg); err != nil {
		return nil, err
	}
	if err := startService(ctx, undo, s.log, "alerting", s.alerts); err != nil {
		return nil, err
	}
	// After recovery: what the replayed runs show was acted on before.
	if err := s.expect.start(b, s.alerts.occur(), s.alerts.held()); err != nil {
		return nil, err
	}
	undo.add(s.expect.stopLoop)
	if err := s.startScheduler(ctx, undo); err != nil {
		return nil, err
	}
	// The hub starts after recovery, so replay does not flood it.
	hubOpts := stream.Options{Bus: b, Changes: func(n int) stream.ChangeSubscription { return b.Subscribe(n) },
		Metrics: httpapi.StreamMetrics(agg, s.clock, 10*time.Second),
		Clock:   s.clock, Logger: s.log, AllowedOrigins: s.cfg.Auth.AllowedOrigins, System: s.systemStats,
		MaxClients: limits.streams, TenantClients: limits.tenantStreams}
	s.alerts.hubOptions(&hubOpts, s.audit)
	hub, err := stream.New(hubOpts)
	if err != nil {
		return nil, err
	}
	if err := startService(ctx, undo, s.log, "the stream", hub); err != nil {
		return nil, err
	}
	s.hub = hub
	close(s.ready)
	return s.conns, nil
}

// systemStats is the body of the stream's system message, as tenant may
// see it: nil until the API is built.
func (s *server) systemStats(tenant string) any {
	if api := s.api.Load(); api != nil {
		return api.SystemStats(tenant)
	}
	return nil
}

// httpServer builds the API and the HTTP server around it.
func (s *server) httpServer() *http.Server {
	var scheduler httpapi.Scheduler
	if s.sched != nil {
		scheduler = schedAPI{s: s.sched, changed: s.applyJobExpectations}
	}
	cfg := s.cfg
	parts := s.parts()
	opts := httpapi.Options{
		Bus: s.bus, Metrics: s.agg, Stream: s.hub, Web: web.Handler(), System: s.systemParts(parts), Prometheus: parts.Handler(s.log, httpapi.TenantOf),
		Scheduler: scheduler, Expectations: s.expect, Auth: s.auth, Audit: s.audit, Clock: s.clock, Logger: s.log,
		AllowedHosts: allowedHosts(cfg), AllowedOrigins: cfg.Auth.AllowedOrigins,
		MaxBodyBytes: cfg.Limits.BodyBytes, IngestRate: cfg.Limits.IngestPerSec,
		Ready: func() bool {
			select {
			case <-s.ready:
				return true
			default:
				return false
			}
		},
	}
	s.alerts.apiOptions(&opts)
	s.api.Store(httpapi.New(opts))
	return apiHTTPServer(s.api.Load(), s.tls, s.log, s.clock, s.conns)
}

// apiHTTPServer is the HTTP server of the API, the same for apollo server
// and a scale-out node: bounded headers, deadlines that a slow or stalled
// client cannot hold a connection past, and at most limits.connections
// connections (conns, the listener it serves).
func apiHTTPServer(h http.Handler, tlsConfig *tls.Config, log *slog.Logger, clock apollo.Clock, conns *httpapi.ConnLimit) *http.Server {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second, // the stream clears it for its connections
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          stdlog.New(&httpErrorLog{log: log, clock: clock, limit: loglimit.New(time.Minute)}, "", 0),
	}
	conns.Watch(srv)
	return srv
}

// httpErrorLog is the HTTP server's own error log. net/http writes a line
// for every failed TLS handshake, and anyone who can reach the port can
// fail one (a scanner, plain HTTP on the TLS port, a flood): those go
// through a limiter, one line a minute with the count held back; the
// rest (a handler's panic) are written as they come.
type httpErrorLog struct {
	log   *slog.Logger
	clock apollo.Clock
	limit *loglimit.Limiter
}

func (e *httpErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	if !strings.HasPrefix(msg, "http: TLS handshake error") {
		e.log.Warn(msg)
		return len(p), nil
	}
	if ok, held := e.limit.Allow("", e.clock.Now()); ok {
		e.log.Warn(msg, "suppressed", held)
	}
	return len(p), nil
}

// serve runs until ctx is done or the HTTP server fails, reloading on
// SIGHUP, then shuts down.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	cfg := s.cfg
	serveErr := make(chan error, 1)
	go func() { serveErr <- serveAPI(s.http, ln) }()
	s.wg.Go(func() { warnInsecure(cfg, s.log, s.clock, s.stop) })
	snapDone := make(chan struct{})
	snapStop := make(chan struct{})
	go s.checkpointLoop(snapStop, snapDone)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var err error
	for err == nil {
		select {
		case <-hup:
			s.reload()
			continue
		case <-ctx.Done():
		case err = <-serveErr:
			s.log.Error("HTTP server stopped", "err", err)
		case err = <-s.fatal:
			s.log.Error("stopping", "err", err)
		}
		break
	}
	return s.shutdown(snapStop, snapDone, err)
}

// open creates the data directory, the log and the bus. Each store it
// opens is closed by undo if a later step fails.
func (s *server) open(undo *undoList) error {
	cfg := s.cfg
	created, err := makeDataDir(cfg.Data)
	if err != nil {
		return fmt.Errorf("data directory %s: %w (choose another --data, or data: in apollo.yaml, that this user can write)", cfg.Data, err)
	}
	// Runs last, after the stores below are closed.
	undo.add(func() {
		empty := s.wal == nil || s.wal.LastLSN() == 0
		if err := removeUnusedDataDir(created, empty); err != nil {
			s.log.Warn("could not remove the data directory this failed start created", "dir", created, "err", err)
		}
	})
	policy, err := wal.ParseSyncPolicy(cfg.Fsync)
	if err != nil {
		return err
	}
	log, err := wal.Open(wal.Options{Dir: filepath.Join(cfg.Data, "wal"), Sync: policy, Logger: s.log})
	if err != nil {
		return fmt.Errorf("opening the log: %w", err)
	}
	undo.add(func() { log.Close() })
	s.wal = log
	// The log's lock makes this process the only writer of the data
	// directory: a temporary file there is one a killed process left.
	removeTempFiles(cfg.Data, s.log)
	warnOpenDataDir(cfg.Data, s.log)
	arch, err := bus.OpenFileArchive(filepath.Join(cfg.Data, "archive"), cfg.Retention.Archive.D(), s.clock)
	if err != nil {
		return fmt.Errorf("opening the archive of finished runs: %w%s", err, unusableDir(err, filepath.Join(cfg.Data, "archive")))
	}
	undo.add(func() { arch.Close() })
	s.arch = arch
	auditLog, err := audit.Open(audit.Options{Dir: filepath.Join(cfg.Data, "audit"), Entries: 10_000, Clock: s.clock, Logger: s.log})
	if err != nil {
		return fmt.Errorf("opening the audit log: %w%s", err, unusableDir(err, filepath.Join(cfg.Data, "audit")))
	}
	undo.add(func() { auditLog.Close() })
	s.audit = auditLog
	if s.auth, err = s.authenticator(); err != nil {
		return err
	}
	s.agg, err = metrics.New(metrics.Options{Clock: s.clock, Logger: s.log,
		BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D()})
	if err != nil {
		return err
	}
	s.expect, err = newExpectations(cfg.Expectations, alert.NewFileRules(filepath.Join(cfg.Data, "expectations")), cfg.Alert.Interval.D(), s.clock, s.log)
	if err != nil {
		return err
	}
	if s.alerts != nil { // apollo bus brings its own (Redis)
		warnServerFiles(cfg.Data, s.log)
	} else { // apollo server has it here
		local, err := newLocalAlerting(cfg, s.log, s.clock, s.agg, s.console, s.expect)
		if err != nil {
			return err
		}
		undo.add(local.closeOutbox)
		s.alerts = local
	}
	s.snaps = newSnapCadence(cfg.SnapshotEvents)
	if err := s.alerts.openLog(context.Background(), cfg.Data, uint64(s.wal.LastLSN())); err != nil {
		return err
	}
	all, live := s.alerts.observers(s.agg)
	if testHoldLive != nil {
		live = append([]bus.Observer{testHoldLive}, live...)
	}
	s.bus, err = bus.New(bus.Options{
		Log: walLog{l: s.wal, snaps: s.snaps}, Archive: s.arch, Clock: s.clock, Logger: s.log,
		Observers: append(all, s.expect), Live: live,
		OnRefused: s.alerts.onRefused,
		OnLogFailed: func(err error) {
			select {
			case s.fatal <- fmt.Errorf("the write-ahead log failed (%w); restart to recover what is on disk", err):
			default:
			}
		},
		TaskQueueLen: cfg.Limits.TaskQueue, HoldLimit: cfg.Limits.HoldingArea, QueueLimit: cfg.Limits.Queue,
		MaxTasks: cfg.Limits.Tasks, HistoryLimit: cfg.Limits.History,
		TenantMaxTasks: cfg.Limits.TenantTasks, TenantTasks: cfg.Limits.TenantTaskLimits(),
		Retention: cfg.Retention.Finished.D(), IdleRetention: cfg.Retention.Idle.D(),
		DedupRetention: cfg.Retention.Dedup.D(), ReorderWindow: cfg.Retention.Reorder.D(),
		Lateness: s.lateness(), DefaultTimeout: cfg.RunTimeout.D(),
	})
	return err
}

func (s *server) shutdown(snapStop chan struct{}, snapDone <-chan struct{}, serveErr error) error {
	s.log.Info("shutting down")
	s.deadman.stop() // from now on whoever watches it sees it gone
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		s.log.Warn("HTTP shutdown", "err", err)
	}
	close(snapStop)
	<-snapDone
	close(s.stop)
	s.wg.Wait()
	s.stopScheduler() // its last events go to the bus before it stops
	bg := context.Background()
	if s.hub != nil {
		stopService(bg, s.log, "the stream", s.hub)
	}
	s.expect.stopLoop() // it records missed runs in the bus
	stopService(bg, s.log, "the bus", s.bus)
	stopService(bg, s.log, "alerting", s.alerts) // after the bus: it observes the bus's last changes
	s.keepForRollback()                          // after the API: no save comes between
	stopService(bg, s.log, "the metrics", s.agg)
	// A final snapshot that cannot be written (a full disk) loses nothing:
	// every accepted event is in the log, which the next start replays, so
	// the stop is still clean (exit 0). Not so when the directory was
	// replaced: the log's files are no longer where the next start looks.
	err := s.checkpoint()
	if err != nil {
		s.log.Error("final snapshot failed; the next start replays the log instead", "err", err)
		if !errors.Is(err, wal.ErrMoved) {
			err = nil
		}
	}
	if cerr := s.closeStores(); cerr != nil && err == nil {
		err = cerr
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}

func (s *server) closeStores() error {
	var errs []error
	if s.arch != nil {
		errs = append(errs, s.arch.Close())
	}
	if s.audit != nil {
		errs = append(errs, s.audit.Close())
	}
	if s.wal != nil {
		errs = append(errs, s.wal.Close())
	}
	return errors.Join(errs...)
}

func latenessFromConfig(cfg config.Config) []bus.Lateness {
	lat := make([]bus.Lateness, len(cfg.Lateness))
	for i, l := range cfg.Lateness {
		lat[i] = bus.Lateness{Prefix: l.Prefix, StartAfter: l.StartAfter.D(), MissedAfter: l.MissedAfter.D(), Timeout: l.Timeout.D()}
	}
	return lat
}

// reload re-reads what SIGHUP reloads: the jobs file, the rules file and
// the expectations file.
// A bad file is logged and the old one keeps working.
func (s *server) reload() {
	s.log.Info("SIGHUP: reloading")
	s.reloadJobs()
	s.alerts.reload()
	s.expect.reload()
}

// parts are the components this process reports in GET /metrics and
// GET /api/v1/system: only those it runs.
func (s *server) parts() selfmetrics.Parts {
	ps := selfmetrics.Parts{
		selfmetrics.Watch("bus", s.bus.Stats),
		selfmetrics.Watch("stream", s.hub.Stats),
		selfmetrics.Watch("connections", s.conns.Stats),
		selfmetrics.Watch("wal", s.wal.Stats),
		selfmetrics.Watch("metrics", s.agg.Stats),
		selfmetrics.Watch("learner", s.expect.learn.Stats),
		selfmetrics.Watch("recovery", func() selfmetrics.Recovery { return s.recovery }),
		selfmetrics.Watch("checkpoint", func() selfmetrics.Checkpoint {
			if c := s.lastCkpt.Load(); c != nil {
				return *c
			}
			return selfmetrics.Checkpoint{}
		}),
	}
	if s.sched != nil {
		ps = append(ps, selfmetrics.Watch("scheduler", s.sched.Stats))
	}
	return append(ps, s.alerts.parts()...)
}

// systemParts are the parts of GET /api/v1/system: the components, and
// what this process says of itself.
func (s *server) systemParts(ps selfmetrics.Parts) map[string]func(string) any {
	parts := ps.System()
	parts["process"] = everyTenant(func() any { return map[string]any{"mode": s.mode(), "listen": s.cfg.Listen, "data": s.cfg.Data} })
	if s.deadman != nil {
		parts["deadman"] = everyTenant(s.deadman.stats)
	}
	s.alerts.system(parts)
	return parts
}

func (s *server) mode() string {
	if _, ok := s.alerts.(*redisAlerting); ok {
		return "bus"
	}
	return "server"
}
