package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/metrics"
	"github.com/apollo-11/apollo/sched"
	"github.com/apollo-11/apollo/wal"
	"github.com/apollo-11/apollo/web"
)

// serverFlags are the flags of `apollo server` (and `apollo demo`).
type serverFlags struct {
	configFile string
	listen     string
	data       string
	fsync      string
	rules      string
	jobs       string
	insecure   bool
}

func (f *serverFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVarP(&f.configFile, "config", "c", "", "configuration file (apollo.yaml); see docs/operations.md")
	fl.StringVar(&f.listen, "listen", "", "address of the API and dashboard (default 127.0.0.1:1969)")
	fl.StringVar(&f.data, "data", "", "data directory for the log and snapshots (default ./apollo-data)")
	fl.StringVar(&f.fsync, "fsync", "", "when the log is flushed to disk: batch (default), interval or off")
	fl.StringVar(&f.rules, "rules", "", "alert rules file, reloaded when it changes")
	fl.StringVar(&f.jobs, "jobs", "", "scheduler jobs file: run the scheduler in this process")
	fl.BoolVar(&f.insecure, "insecure-no-auth", false, "allow listening beyond loopback without tokens (warns every minute)")
}

// load builds the configuration: defaults, file, environment, flags, Validate.
func (f *serverFlags) load(cmd *cobra.Command) (config.Config, error) {
	cfg := config.Default()
	if f.configFile != "" {
		var err error
		if cfg, err = config.Load(f.configFile, os.Getenv); err != nil {
			return cfg, err
		}
	}
	cfg.ApplyEnv(os.Getenv)
	fl := cmd.Flags()
	for name, dst := range map[string]*string{"listen": &cfg.Listen, "data": &cfg.Data, "fsync": &cfg.Fsync, "rules": &cfg.Rules, "jobs": &cfg.Jobs} {
		if fl.Changed(name) {
			*dst, _ = fl.GetString(name)
		}
	}
	if fl.Changed("insecure-no-auth") {
		cfg.Auth.InsecureNoAuth = f.insecure
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("configuration:\n%w", err)
	}
	return cfg, nil
}

func newServerCmd() *cobra.Command {
	var f serverFlags
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the all-in-one server (no other service needed)",
		Long: `Run Apollo-11 as one process: ingest, task state, the write-ahead log,
metrics, alerting, the API and the dashboard. State lives in the data
directory; nothing else is needed.

An event is answered "accepted" only once it is on disk (with --fsync batch,
the default). On SIGTERM or Ctrl-C the server stops accepting, drains,
writes a snapshot and exits 0.`,
		Example: `  apollo server
  apollo server --listen 127.0.0.1:1969 --data /var/lib/apollo
  apollo server --config /etc/apollo/apollo.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.load(cmd)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			return runServer(cmd.Context(), cfg, serverDeps{log: log, out: cmd.OutOrStdout()})
		},
	}
	f.register(cmd)
	return cmd
}

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
	log      *slog.Logger
	clock    apollo.Clock
	console  io.Writer // where console channels write
	wal      *wal.Log
	bus      *bus.Bus
	agg      *metrics.Aggregator
	hub      *httpapi.Hub
	alerts   alertSide
	recovery httpapi.Recovery // measured at start, for /metrics
	// seqReplay replays the log on one goroutine (bus.Replay) instead of
	// a parallel bus.Replayer: BenchmarkServerRecovery compares the two.
	seqReplay bool
	sched     *sched.Scheduler // nil without --jobs
	reporter  *busReporter
	arch      *bus.FileArchive
	audit     *audit.Log
	auth      httpapi.Authenticator
	http      *http.Server
	ready     chan struct{}
	stop      chan struct{} // closed at shutdown: background loops end
	fatal     chan error    // the log failed: shut down and exit non-zero
	wg        sync.WaitGroup

	// api is built after the hub starts, whose system messages read it
	// from another goroutine.
	api atomic.Pointer[httpapi.Server]
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
	if os.Getenv("GOGC") == "" && cfg.GCPercent > 0 {
		debug.SetGCPercent(cfg.GCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" && cfg.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimitMiB << 20)
	}
	if d.redis != nil {
		s.alerts = newRedisAlerting(d.redis, cfg, s.log)
	}
	ln, err := s.start(ctx)
	if err != nil {
		return err
	}
	s.http = s.httpServer()
	addr := ln.Addr().String()
	scheme := "http"
	if cfg.TLS.Cert != "" {
		scheme = "https"
	}
	if d.out != nil {
		fmt.Fprintf(d.out, "Apollo-11 is up: %s://%s  (data in %s)\n", scheme, addr, cfg.Data)
	}
	s.log.Info("serving", "addr", addr, "data", cfg.Data, "fsync", cfg.Fsync)
	if d.ready != nil {
		d.ready(addr)
	}
	return s.serve(ctx, ln)
}

// start opens the stores, listens, recovers the state and starts every
// service, in that order. On failure it undoes what it did.
func (s *server) start(ctx context.Context) (ln net.Listener, err error) {
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	if err := s.open(); err != nil {
		return nil, err
	}
	undo = append(undo, func() { s.closeStores() })
	if ln, err = net.Listen("tcp", s.cfg.Listen); err != nil {
		return nil, fmt.Errorf("listening on %s: %w (is another apollo running? choose another --listen)", s.cfg.Listen, err)
	}
	undo = append(undo, func() { ln.Close() })
	if err := s.recover(); err != nil {
		return nil, err
	}
	s.bus.Start(ctx)
	s.agg.Start(ctx)
	undo = append(undo, s.bus.Stop, s.agg.Stop)
	if err := s.alerts.start(ctx); err != nil {
		return nil, err
	}
	undo = append(undo, s.alerts.stop)
	if err := s.startScheduler(ctx); err != nil {
		return nil, err
	}
	// The hub starts after recovery, so replay does not flood it.
	hubOpts := httpapi.HubOptions{Bus: s.bus, Clock: s.clock, Logger: s.log,
		AllowedOrigins: s.cfg.Auth.AllowedOrigins, System: s.systemStats}
	s.alerts.hubOptions(&hubOpts, s.audit)
	if s.hub, err = httpapi.NewHub(hubOpts); err != nil {
		return nil, err
	}
	s.hub.Start(ctx)
	close(s.ready)
	return ln, nil
}

// systemStats is the body of the stream's system message: nil until the
// API is built.
func (s *server) systemStats() any {
	if api := s.api.Load(); api != nil {
		return api.SystemStats()
	}
	return nil
}

// httpServer builds the API and the HTTP server around it.
func (s *server) httpServer() *http.Server {
	var scheduler httpapi.Scheduler
	if s.sched != nil {
		scheduler = schedAPI{s.sched}
	}
	cfg := s.cfg
	opts := httpapi.Options{
		Bus: s.bus, Metrics: s.agg, Stream: s.hub, Web: web.Handler(), System: s.systemParts(), Monitored: s.monitored(),
		Scheduler: scheduler, Auth: s.auth, Audit: s.audit, Clock: s.clock, Logger: s.log,
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
	return &http.Server{
		Handler:           s.api.Load(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second, // the stream clears it for its connections
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// serve runs until ctx is done or the HTTP server fails, reloading on
// SIGHUP, then shuts down.
func (s *server) serve(ctx context.Context, ln net.Listener) error {
	cfg := s.cfg
	serveErr := make(chan error, 1)
	go func() {
		if cfg.TLS.Cert != "" {
			serveErr <- s.http.ServeTLS(ln, cfg.TLS.Cert, cfg.TLS.Key)
			return
		}
		serveErr <- s.http.Serve(ln)
	}()
	if cfg.Auth.InsecureNoAuth && len(cfg.Auth.Tokens) == 0 {
		s.wg.Add(1)
		go s.warnInsecure()
	}
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

// open creates the data directory, the log and the bus.
func (s *server) open() error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	policy, err := wal.ParseSyncPolicy(cfg.Fsync)
	if err != nil {
		return err
	}
	s.wal, err = wal.Open(wal.Options{Dir: filepath.Join(cfg.Data, "wal"), Sync: policy, Logger: s.log})
	if err != nil {
		return fmt.Errorf("opening the log: %w", err)
	}
	s.arch, err = bus.OpenFileArchive(filepath.Join(cfg.Data, "archive"), cfg.Retention.Archive.D(), s.clock)
	if err != nil {
		s.closeStores()
		return err
	}
	if s.audit, err = audit.Open(filepath.Join(cfg.Data, "audit"), 10_000, s.clock); err != nil {
		s.closeStores()
		return err
	}
	if s.auth, err = s.authenticator(); err != nil {
		s.closeStores()
		return err
	}
	s.agg, err = metrics.New(metrics.Options{Clock: s.clock, Logger: s.log,
		BucketRetention: cfg.Retention.Buckets.D(), RollupRetention: cfg.Retention.Rollups.D()})
	if err != nil {
		s.closeStores()
		return err
	}
	if s.alerts == nil { // apollo bus brings its own (Redis); apollo server has it here
		if s.alerts, err = newLocalAlerting(cfg, s.log, s.clock, s.agg, s.console); err != nil {
			s.closeStores()
			return err
		}
	}
	s.bus, err = bus.New(bus.Options{
		Log: walLog{s.wal}, Archive: s.arch, Clock: s.clock, Logger: s.log, Observers: s.alerts.observers(s.agg),
		OnRefused: s.alerts.onRefused,
		OnLogFailed: func(err error) {
			select {
			case s.fatal <- fmt.Errorf("the write-ahead log failed (%w); restart to recover what is on disk", err):
			default:
			}
		},
		TaskQueueLen: cfg.Limits.TaskQueue, HoldLimit: cfg.Limits.HoldingArea, QueueLimit: cfg.Limits.Queue,
		MaxTasks: cfg.Limits.Tasks, HistoryLimit: cfg.Limits.History,
		Retention: cfg.Retention.Finished.D(), IdleRetention: cfg.Retention.Idle.D(),
		DedupRetention: cfg.Retention.Dedup.D(), ReorderWindow: cfg.Retention.Reorder.D(),
		Lateness: latenessFromConfig(cfg),
	})
	if err != nil {
		s.closeStores()
		return err
	}
	return nil
}

// recover loads the newest snapshot and replays the log after it.
func (s *server) recover() error {
	start := time.Now()
	lsn, body, err := s.wal.LatestSnapshot()
	if err != nil {
		return fmt.Errorf("reading the snapshot: %w", err)
	}
	if body != nil {
		err := readSnapshot(body, s.sections())
		body.Close()
		if err != nil {
			return fmt.Errorf("restoring snapshot at LSN %d: %w (move the data directory's newest snapshot away to fall back to the previous one)", lsn, err)
		}
	}
	// Different tasks replay in parallel; each task's records in log order.
	n := 0
	if s.seqReplay {
		err = s.wal.Replay(wal.LSN(lsn), func(l wal.LSN, p []byte) error {
			n++
			return s.bus.Replay(uint64(l), p)
		})
	} else {
		rp := s.bus.NewReplayer(0)
		err = s.wal.Replay(wal.LSN(lsn), func(l wal.LSN, p []byte) error {
			n++
			return rp.Add(uint64(l), p)
		})
		// A record that did not decode comes before anything the log
		// failed at afterwards: its error wins.
		err = cmp.Or(rp.Finish(), err)
	}
	if err != nil {
		return fmt.Errorf("replaying the log: %w", err)
	}
	el := time.Since(start)
	s.recovery = httpapi.Recovery{Duration: el, Events: int64(n)}
	s.log.Info("recovered", "snapshot_lsn", lsn, "replayed", n, "took", el.Round(time.Millisecond),
		"events_per_second", int(float64(n)/max(el.Seconds(), 1e-9)))
	return nil
}

// sections are the parts of a snapshot, in order.
func (s *server) sections() []section {
	return []section{
		{name: "bus", write: s.bus.WriteState, read: s.bus.ReadState},
		{name: "metrics", write: s.agg.WriteSnapshot, read: s.agg.ReadSnapshot},
	}
}

// checkpointLoop writes a snapshot every SnapshotEvery until stop.
func (s *server) checkpointLoop(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := s.clock.NewTicker(s.cfg.SnapshotEvery.D())
	defer t.Stop()
	for {
		select {
		case <-t.C():
			if err := s.checkpoint(); err != nil {
				s.log.Error("snapshot failed; the log keeps growing until one succeeds", "err", err)
			}
		case <-stop:
			return
		}
	}
}

// checkpoint copies the state during a short pause, then writes it.
func (s *server) checkpoint() error {
	var buf snapshotBuffer
	var at uint64
	err := s.bus.Checkpoint(func(lsn uint64) error {
		at = lsn
		return writeSnapshot(&buf, s.sections())
	})
	if err != nil {
		return err
	}
	if at == 0 {
		return nil // nothing was ever logged: the empty state needs no snapshot
	}
	if err := s.wal.Wait(context.Background(), wal.LSN(at)); err != nil {
		return err
	}
	return s.wal.WriteSnapshot(wal.LSN(at), func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	})
}

func (s *server) shutdown(snapStop chan struct{}, snapDone <-chan struct{}, serveErr error) error {
	s.log.Info("shutting down")
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
	if s.hub != nil {
		s.hub.Stop()
	}
	s.bus.Stop()
	s.alerts.stop() // after the bus: it observes the bus's last changes
	s.agg.Stop()
	err := s.checkpoint()
	if err != nil {
		s.log.Error("final snapshot failed; the next start replays the log instead", "err", err)
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

// walLog adapts *wal.Log to bus.Log (LSNs are plain numbers to the bus).
type walLog struct{ l *wal.Log }

func (w walLog) Append(p []byte) (uint64, error) {
	lsn, err := w.l.Append(p)
	return uint64(lsn), err
}

func (w walLog) Wait(ctx context.Context, lsn uint64) error { return w.l.Wait(ctx, wal.LSN(lsn)) }

// checkListen refuses to serve beyond loopback without tokens, unless told
// to (docs/security.md).
func checkListen(cfg config.Config) error {
	if len(cfg.Auth.Tokens) > 0 || cfg.Auth.InsecureNoAuth || isLoopback(cfg.Listen) {
		return nil
	}
	return fmt.Errorf(`refusing to listen on %s without tokens: anyone who can reach it could read and change everything.
Either:
  - make a token (apollo token create --role admin), add the printed line to apollo.yaml under auth.tokens,
    and start with --config apollo.yaml;
  - or listen on loopback (--listen 127.0.0.1:1969) behind a proxy that authenticates;
  - or, on a network you trust completely, pass --insecure-no-auth`, cfg.Listen)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// authenticator returns token authentication when tokens are configured,
// and the open local mode otherwise. Failed attempts go to the audit log.
func (s *server) authenticator() (httpapi.Authenticator, error) {
	if len(s.cfg.Auth.Tokens) == 0 {
		return httpapi.OpenAuth{}, nil
	}
	toks, err := tokensFromConfig(s.cfg.Auth.Tokens)
	if err != nil {
		return nil, err
	}
	a := httpapi.NewTokenAuth(toks)
	a.OnFailure = func(r *http.Request, reason string) {
		s.audit.Record(audit.Entry{Actor: "?", Action: "auth.fail", Target: r.Method + " " + r.URL.Path, Detail: reason, Remote: r.RemoteAddr})
	}
	return a, nil
}

// warnInsecure reminds, every minute, that anyone can use this server.
func (s *server) warnInsecure() {
	defer s.wg.Done()
	warn := func() {
		s.log.Warn("serving WITHOUT authentication beyond loopback (--insecure-no-auth): anyone who reaches " + s.cfg.Listen + " can read and change everything")
	}
	warn()
	t := s.clock.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-t.C():
			warn()
		case <-s.stop:
			return
		}
	}
}

func latenessFromConfig(cfg config.Config) []bus.Lateness {
	lat := make([]bus.Lateness, len(cfg.Lateness))
	for i, l := range cfg.Lateness {
		lat[i] = bus.Lateness{Prefix: l.Prefix, StartAfter: l.StartAfter.D(), MissedAfter: l.MissedAfter.D(), Timeout: l.Timeout.D()}
	}
	return lat
}

// reload re-reads what SIGHUP reloads: the jobs file and the rules file.
// A bad file is logged and the old one keeps working.
func (s *server) reload() {
	s.log.Info("SIGHUP: reloading")
	s.reloadJobs()
	s.alerts.reload()
}

// systemParts are what this process adds to GET /api/v1/system beyond
// the components in monitored().
func (s *server) systemParts() map[string]func() any {
	parts := map[string]func() any{
		"process": func() any { return map[string]any{"mode": s.mode(), "listen": s.cfg.Listen, "data": s.cfg.Data} },
	}
	s.alerts.system(parts)
	return parts
}

// monitored lists the components /metrics and /api/v1/system report.
func (s *server) monitored() httpapi.Monitored {
	m := httpapi.Monitored{WAL: s.wal, Metrics: s.agg, Recovery: &s.recovery}
	if s.sched != nil {
		m.Scheduler = s.sched
	}
	s.alerts.monitored(&m)
	return m
}

func (s *server) mode() string {
	if _, ok := s.alerts.(*redisAlerting); ok {
		return "bus"
	}
	return "server"
}
