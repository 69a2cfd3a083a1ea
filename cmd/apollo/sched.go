package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/redisstore"
	"github.com/apollo-11/apollo/sched"
)

// The in-process scheduler reports its runs the way `apollo sched` does:
// through the agent package's client (its queue, batching and retry),
// posting to this server's own API. Its requests never touch the network:
// loopbackTransport hands them to the API handler in memory, so they take the same
// checks, limits and answers as any reporter's.

// schedReporter is the agent client of the in-process scheduler; addr is
// the address the server listens on (the Host its API answers to).
func (s *server) schedReporter(addr string) (*agent.Client, error) {
	opts := []agent.Option{
		agent.WithHTTPClient(&http.Client{Transport: loopbackTransport{s}}),
		agent.WithLogger(s.log), agent.WithClock(s.clock),
		// A run's start shows at once, not after the SDK's 200 ms.
		agent.WithFlushInterval(10 * time.Millisecond),
	}
	if s.schedToken != "" {
		opts = append(opts, agent.WithToken(s.schedToken))
	}
	return agent.New("http://"+addr, opts...)
}

// schedTokenName names the token the in-process scheduler reports with
// when the server has tokens: made at each start, never written anywhere.
const schedTokenName = "apollo-sched (in-process)"

// loopbackTransport is an http.RoundTripper that serves each request with the
// server's API handler, in memory. Before the API is built it answers 503
// with Retry-After, which the agent client waits out.
type loopbackTransport struct{ s *server }

func (t loopbackTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &memoryResponse{header: http.Header{}, code: http.StatusOK}
	if api := t.s.api.Load(); api != nil {
		api.ServeHTTP(w, r)
	} else {
		w.header.Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.code, http.StatusText(w.code)), StatusCode: w.code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: r,
	}, nil
}

// memoryResponse is the http.ResponseWriter of an in-memory request.
type memoryResponse struct {
	header http.Header
	body   bytes.Buffer
	code   int
	wrote  bool
}

func (w *memoryResponse) Header() http.Header { return w.header }

func (w *memoryResponse) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
}

func (w *memoryResponse) Write(p []byte) (int, error) {
	w.wrote = true
	return w.body.Write(p)
}

// loadJobs reads the jobs file, if there is one, before anything else
// starts: a mistake in it is reported at once, not after recovery.
func (s *server) loadJobs() error {
	if s.cfg.Jobs == "" {
		return nil
	}
	f, err := sched.LoadFile(s.cfg.Jobs)
	if err != nil {
		return fmt.Errorf("jobs file: %w\n%s", err, fixJobs)
	}
	s.jobs = f
	return nil
}

// newScheduler makes the in-process scheduler on the loaded jobs, and
// puts their expectations in force, before the log is replayed: the
// replayed runs then count for them, and the runs expected while the
// server was down are judged, as those of the expectations file are.
// undo closes its reporter if a later start-up step fails.
func (s *server) newScheduler(addr string, undo *undoList) error {
	if s.jobs == nil {
		return nil
	}
	rep, err := s.schedReporter(addr)
	if err != nil {
		return fmt.Errorf("starting the scheduler's reporter: %w", err)
	}
	undo.add(func() { s.closeReporter(rep) })
	sc, err := sched.New(s.jobs, sched.Options{Clock: s.clock, Reporter: rep, Logger: s.log,
		StateDir: filepath.Join(s.cfg.Data, "sched")})
	if stateErr := (*sched.StateError)(nil); errors.As(err, &stateErr) {
		return err
	}
	if err != nil {
		return fmt.Errorf("jobs file: %w\n%s", err, fixJobs)
	}
	s.reporter, s.sched = rep, sc
	s.applyJobExpectations()
	return nil
}

// startScheduler starts the scheduler newScheduler made. undo stops it if
// a later start-up step fails.
func (s *server) startScheduler(ctx context.Context, undo *undoList) error {
	if s.sched == nil {
		return nil
	}
	sc := s.sched
	if err := sc.Start(ctx); err != nil {
		return fmt.Errorf("starting the scheduler: %w", err)
	}
	undo.add(func() { stopRuns(sc, s.log) })
	return nil
}

// applyJobExpectations makes the scheduler's jobs expected of the default
// tenant (schedule, timeout, after), under what the expectations file or
// the API says of the same jobs: again after every reload, pause and
// resume, since a paused job is expected to run no more.
func (s *server) applyJobExpectations() {
	s.jobsExpectMu.Lock()
	defer s.jobsExpectMu.Unlock()
	if err := s.expect.setJobs(s.sched.Expectations()); err != nil {
		s.log.Error("the scheduler's jobs do not make expectations; the ones before keep running", "err", err)
	}
}

// fixJobs is what to do about a jobs file that does not load.
const fixJobs = "(fix the file and start again, or start without --jobs; apollo sched check FILE lists every problem)"

// lateness is the configured thresholds plus each scheduled job's
// late_after, for that job of the scheduler's tenant (the default one)
// alone. It is read from the jobs file, so that the bus judges the runs
// it replays at start as it judged them live, before the scheduler
// starts.
func (s *server) lateness() []bus.Lateness {
	lat := latenessFromConfig(s.cfg)
	if s.jobs != nil {
		for name, d := range s.jobs.Thresholds() {
			lat = append(lat, bus.Lateness{Job: name, Tenant: "", StartAfter: d})
		}
	}
	return lat
}

// reloadJobs re-reads the jobs file; a bad file leaves the old jobs running.
func (s *server) reloadJobs() {
	if s.sched == nil {
		return
	}
	f, err := sched.LoadFile(s.cfg.Jobs)
	if err == nil {
		err = s.sched.Reload(f)
	}
	if err != nil {
		s.log.Error("jobs file not reloaded; the old jobs keep running", "file", s.cfg.Jobs, "err", err)
		return
	}
	s.jobs = f
	s.bus.SetLateness(s.lateness())
	s.applyJobExpectations()
	s.log.Info("jobs file reloaded", "file", s.cfg.Jobs)
}

// stopScheduler stops the scheduler, then publishes its last events.
func (s *server) stopScheduler() {
	if s.sched == nil {
		return
	}
	stopRuns(s.sched, s.log)
	s.closeReporter(s.reporter)
}

// closeReporter publishes the scheduler's last events, waiting for the
// bus at most 20 s; what is left then is logged by the client.
func (s *server) closeReporter(rep *agent.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rep.Close(ctx); err != nil {
		s.log.Error("the scheduler's last events were not all stored", "err", err)
	}
}

// stopRuns starts no new runs and lets running ones finish within their
// timeouts (a minute at most).
func stopRuns(sc *sched.Scheduler, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sc.Stop(ctx); err != nil {
		log.Warn("scheduler stopped with runs cut short", "err", err)
	}
}

// schedAPI adapts the scheduler to the routes httpapi serves for it.
// changed is called after a pause or a resume: what is expected of the
// job changes with it.
type schedAPI struct {
	s       *sched.Scheduler
	changed func()
}

func (a schedAPI) JobList() []apollo.ScheduledJob      { return a.s.Jobs() }
func (a schedAPI) Trigger(name string) (string, error) { return a.s.Trigger(name) }
func (a schedAPI) Pause(name string) error             { return a.paused(a.s.Pause(name)) }
func (a schedAPI) Resume(name string) error            { return a.paused(a.s.Resume(name)) }

func (a schedAPI) paused(err error) error {
	if err == nil {
		a.changed()
	}
	return err
}

// NextRuns tells the job health board when each job runs next; a paused
// job has no next run.
func (a schedAPI) NextRuns() map[string]time.Time {
	out := map[string]time.Time{}
	for _, j := range a.s.Jobs() {
		if !j.Paused && !j.Next.IsZero() {
			out[j.Name] = j.Next
		}
	}
	return out
}

func newSchedCmd() *cobra.Command {
	var (
		cf                   clientFlags
		jobs                 string
		stateDir             string
		drain                bool
		configFile, redisURL string
	)
	cmd := &cobra.Command{
		Use:   "sched",
		Short: "Run the scheduler as its own process, reporting to a server",
		Long: `Run the jobs in a jobs file on their schedules and report every run to an
Apollo-11 server. A monitoring outage never stops the jobs: reports wait in
a spool on disk and are sent when the server is back.

On SIGTERM or Ctrl-C no new runs start; running ones get their timeout
(or, with --drain, as long as they need), then it exits. SIGHUP reloads the
jobs file; a bad file leaves the old jobs running. See docs/scheduler.md.

With Redis (--redis, or redis.url in --config) it writes a heartbeat there
every alert.heartbeat, so that the bus and the alert processes tell when it
stops (docs/monitoring.md); with deadman.url in --config it calls that URL
every deadman.every.`,
		Example: `  apollo sched --jobs jobs.yaml --server http://apollo.internal:1969 --token $APOLLO_TOKEN
  apollo sched --jobs jobs.yaml --server http://apollo.internal:1969 --config /etc/apollo/apollo.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cf.resolve()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)).With("process", "sched")
			cfg, err := schedConfig(cmd, configFile, redisURL)
			if err != nil {
				return err
			}
			f, err := sched.LoadFile(jobs)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				return err
			}
			client, err := agent.New(cf.server, agent.WithToken(cf.token), agent.WithLogger(log),
				agent.WithSpoolDir(filepath.Join(stateDir, "spool")))
			var ae *apollo.Error
			if errors.As(err, &ae) && ae.Code == apollo.ECONFLICT && ae.Field == "WithSpoolDir" {
				// The spool is in the state directory, and its lock comes
				// first: say what the user named.
				return fmt.Errorf("state directory %s is in use by another scheduler (give each apollo sched its own --state, or stop the other one)", stateDir)
			}
			if err != nil {
				return err
			}
			sc, err := sched.New(f, sched.Options{Reporter: client, Logger: log, StateDir: stateDir, Owner: schedOwner(cf.token)})
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if err := sc.Start(ctx); err != nil {
				return err
			}
			stopWatched, err := watchedSched(ctx, cfg, sc, log)
			if err != nil {
				return err
			}
			defer stopWatched()
			fmt.Fprintf(cmd.OutOrStdout(), "apollo sched: %d jobs from %s, reporting to %s\n", len(sc.Jobs()), jobs, cf.server)
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
		loop:
			for {
				select {
				case <-hup:
					nf, err := sched.LoadFile(jobs)
					if err == nil {
						err = sc.Reload(nf)
					}
					if err != nil {
						log.Error("jobs file not reloaded; the old jobs keep running", "err", err)
					} else {
						log.Info("jobs file reloaded")
					}
				case <-ctx.Done():
					break loop
				}
			}
			stopCtx, cancel := context.WithTimeout(context.Background(), 24*time.Hour)
			if !drain {
				stopCtx, cancel = context.WithTimeout(context.Background(), time.Minute)
			}
			defer cancel()
			if err := sc.Stop(stopCtx); err != nil {
				log.Warn("runs cut short at shutdown", "err", err)
			}
			closeCtx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel2()
			return client.Close(closeCtx) // what is not delivered stays in the spool
		},
	}
	cf.registerEnv(cmd)
	fl := cmd.Flags()
	fl.StringVar(&jobs, "jobs", "jobs.yaml", "the jobs file")
	fl.StringVar(&stateDir, "state", "apollo-sched", "directory for the scheduler's state and its report spool")
	fl.BoolVar(&drain, "drain", false, "at shutdown, let running jobs finish however long they take")
	fl.StringVarP(&configFile, "config", "c", "", "configuration file: redis, alert.heartbeat and deadman are read")
	fl.StringVar(&redisURL, "redis", "", "Redis of the three-process mode: write a heartbeat there")
	cmd.AddCommand(newSchedCheckCmd(), newSchedLostCmd())
	return cmd
}

// schedOwner is the Owner of apollo sched's runs: a short hash of the
// token it reports them with, never the token. A scheduler killed with
// runs in progress and started again with another token, which may be
// another tenant's, leaves those runs for a start with the old one
// instead of reporting them as the new token's tenant's.
func schedOwner(token string) string {
	sum := sha256.Sum256([]byte("apollo sched owner\x00" + token))
	return "token " + hex.EncodeToString(sum[:6])
}

// schedConfig reads what apollo sched takes from the configuration: Redis
// for its heartbeat, and the dead man's switch.
func schedConfig(cmd *cobra.Command, file, redisURL string) (config.Config, error) {
	cfg := config.Default()
	if file != "" {
		var err error
		if cfg, err = config.Load(file, os.Getenv); err != nil {
			return cfg, err
		}
	}
	cfg.ApplyEnv(os.Getenv)
	if cmd.Flags().Changed("redis") {
		cfg.Redis.URL = redisURL
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("configuration:\n%w", err)
	}
	return cfg, nil
}

// watchedSched starts what tells others that the scheduler runs: its
// heartbeat in Redis, if there is one, and the dead man's switch, if
// configured. stop ends them, the heartbeat with a last beat that says the
// scheduler shut down. They outlive ctx: while the scheduler drains its
// runs after SIGTERM it is still alive.
func watchedSched(ctx context.Context, cfg config.Config, sc *sched.Scheduler, log *slog.Logger) (stop func(), err error) {
	dm := startDeadman(cfg.Deadman, "sched", apollo.SystemClock, log)
	if cfg.Redis.URL == "" {
		return dm.stop, nil
	}
	c, err := openRedis(ctx, cfg, log)
	if err != nil {
		dm.stop()
		return nil, err
	}
	beat := redisstore.NewHeartbeat(c, cfg.Redis.Prefix, "sched", processID(), cfg.Alert.Heartbeat.D()).
		WithStats(func() any { return sc.Stats() })
	if err := beat.Start(ctx); err != nil {
		c.Close()
		dm.stop()
		return nil, err
	}
	return func() { stopService(context.Background(), log, "the heartbeat", beat); c.Close(); dm.stop() }, nil
}

func newSchedCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE...",
		Short: "Check jobs files: every problem with its place, or ok and the count",
		Long: `Check jobs files (docs/scheduler.md) the way apollo sched and apollo server
--jobs will when they load them, and run nothing. It also looks for each
job's program (in the job's PATH, or its own) and working directory, as
the scheduler would start them on this host: a program that is missing or
not executable is a problem here, where loading the file lets the job's
runs fail with the reason. Every problem is printed as
FILE:LINE:COL: job "NAME": field: message (hint). With no problem it
prints "ok: N jobs". "-" reads a file from standard input.

Exit codes: 0 every file is good, 1 a problem, 2 a mistake in the command
line.`,
		Example: `  apollo sched check jobs.yaml`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if err := oneStdin(files); err != nil {
				return err
			}
			bad := checkIssueFiles(cmd.InOrStdin(), cmd.OutOrStdout(), files, "jobs file", func(file string, src []byte) (string, error) {
				f, err := sched.Parse(file, src)
				if err != nil {
					return "", err
				}
				if err := f.CheckPrograms(); err != nil {
					return "", err
				}
				return plural(len(f.Jobs), "job"), nil
			})
			if bad > 0 {
				return &exitError{code: 1, err: fmt.Errorf("%d problem(s) found", bad)}
			}
			return nil
		},
	}
}
