package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/internal/lifecycle"
	"github.com/apollo-11/apollo/notify"
)

// deadman is the outbound heartbeat (config.Deadman): it calls a URL now
// and every interval, so that a watcher outside this process, another
// Apollo-11 or a healthchecks service, notices when the calls stop.
// Nothing inside a process can report its own death; this is what makes
// the monitor monitored from elsewhere (docs/monitoring.md).
type deadman struct {
	cfg     config.Deadman
	url     string // {process} replaced
	target  string // scheme://host only: the path or query may hold the key
	body    []byte // POST: who is calling
	clock   apollo.Clock
	client  *http.Client
	log     *slog.Logger
	ctx     context.Context // of the calls: ends at stop
	life    lifecycle.Group
	sent    atomic.Int64
	failed  atomic.Int64
	mu      sync.Mutex
	lastOK  time.Time
	lastErr string
}

// startDeadman calls the URL at once, then every interval of clock, until
// stop. process is what this process is: server, bus, alert or sched. It
// returns nil when no URL is configured.
func startDeadman(cfg config.Deadman, process string, clock apollo.Clock, log *slog.Logger) *deadman {
	if cfg.URL == "" {
		return nil
	}
	d := &deadman{cfg: cfg, url: strings.ReplaceAll(cfg.URL, "{process}", process), clock: clock,
		client: &http.Client{Timeout: cfg.Timeout.D(), CheckRedirect: notify.AnswerRedirects}, log: log.With("component", "deadman"),
		life: lifecycle.Group{Name: "deadman"}}
	if u, err := url.Parse(d.url); err == nil {
		d.target = u.Scheme + "://" + u.Host
	}
	host, _ := os.Hostname()
	d.body, _ = json.Marshal(map[string]any{"source": "apollo-11", "process": process, "id": processID(), "host": host})
	_ = d.life.Start(context.Background(), func(run context.Context) error { // a new group always starts
		d.ctx = run
		// Armed before the goroutine starts, so that a test's fake clock
		// can move as soon as this returns.
		tick := clock.NewTicker(cfg.Every.D())
		d.life.Go(func(ctx context.Context) error { d.loop(ctx, tick); return nil })
		return nil
	})
	return d
}

func (d *deadman) loop(ctx context.Context, tick apollo.Ticker) {
	defer tick.Stop()
	d.beat()
	for {
		select {
		case <-tick.C():
			d.beat()
		case <-ctx.Done():
			return
		}
	}
}

// beat makes one call. A failure is logged when it starts and when it
// ends, not at every beat, and counted.
func (d *deadman) beat() {
	err := d.call()
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.sent.Add(1)
		if d.lastErr != "" {
			d.log.Info("deadman: the heartbeat URL answers again", "target", d.target)
		}
		d.lastOK, d.lastErr = d.clock.Now(), ""
		return
	}
	if d.ctx.Err() != nil {
		return // stopping: the call was cut short, not refused
	}
	d.failed.Add(1)
	if d.lastErr == "" {
		d.log.Warn("deadman: the heartbeat URL does not answer; whoever watches it will think this process is down",
			"target", d.target, "err", err)
	}
	d.lastErr = err.Error()
}

func (d *deadman) call() error {
	method, body := http.MethodGet, io.Reader(nil)
	if d.cfg.Method == http.MethodPost {
		method, body = http.MethodPost, bytes.NewReader(d.body)
	}
	req, err := http.NewRequestWithContext(d.ctx, method, d.url, body)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "apollo-11 deadman")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// The URL (with its key) is in the error: say only where.
		return fmt.Errorf("calling %s: %w", d.target, unwrapURLError(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 == 3 {
		where := ""
		if loc, err := resp.Location(); err == nil {
			where = "; it pointed to " + loc.Scheme + "://" + loc.Host // its path may hold a key too
		}
		return fmt.Errorf("%s answered %s: the heartbeat does not follow redirects (the watcher would not hear it); set deadman.url to the address that takes the call%s",
			d.target, resp.Status, where)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", d.target, resp.Status)
	}
	return nil
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// stop ends the calls and waits for one in flight. A nil deadman (none
// configured) stops at once.
func (d *deadman) stop() {
	if d == nil {
		return
	}
	d.life.Stop(context.Background(), nil)
}

// stats is what GET /api/v1/system shows of it.
func (d *deadman) stats() any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return map[string]any{"target": d.target, "every": d.cfg.Every.D().String(), "sent": d.sent.Load(),
		"failed": d.failed.Load(), "lastOK": d.lastOK, "lastError": d.lastErr}
}
