package main

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/alert"
	"github.com/apollo-11/apollo/audit"
	"github.com/apollo-11/apollo/bus"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/rules"
)

// openAlerting builds the alert engine over the metrics and the dispatcher,
// with its state in the data directory, and the loader of the rules file.
func (s *server) openAlerting() error {
	cfg := s.cfg
	var err error
	s.engine, err = alert.New(alert.Options{
		Store: s.agg, Sender: s.disp, Clock: s.clock, Logger: s.log,
		State:          alert.NewFileState(filepath.Join(cfg.Data, "alerts.json")),
		Interval:       cfg.Alert.Interval.D(),
		DedupWindow:    cfg.Alert.DedupWindow.D(),
		RepeatInterval: cfg.Alert.Repeat.D(),
		SelfChannels:   slices.Sorted(maps.Keys(cfg.Channels)),
	})
	if err != nil {
		return err
	}
	if cfg.Rules == "" {
		return nil
	}
	s.loader, err = alert.NewLoader(alert.LoaderOptions{
		Path: cfg.Rules, Clock: s.clock, Logger: s.log, KnownChannel: s.knownChannel,
		OnLoad: func(rs []*rules.Rule, src []byte) { s.engine.SetRulesSource("", rs, src) },
	})
	if err != nil {
		return err
	}
	if err := s.loader.Load(); err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	return nil
}

func (s *server) knownChannel(name string) bool {
	_, ok := s.cfg.Channels[name]
	return ok
}

// selfAlertOnRefusal turns the bus's refused events into a high-severity
// alert about Apollo-11 itself (seed 4.1).
func (s *server) selfAlertOnRefusal(r bus.Refusal) {
	if s.engine != nil {
		s.engine.SelfAlert("apollo_events_refused", apollo.SeverityCritical,
			"Apollo-11 refused events (not stored): "+r.Reason+"; reporters must resend them")
	}
}

// startAlerting starts evaluating and watching the rules file.
func (s *server) startAlerting(ctx context.Context) error {
	if err := s.engine.Start(ctx); err != nil {
		return err
	}
	if s.loader != nil {
		return s.loader.Start(ctx)
	}
	return nil
}

func (s *server) stopAlerting() {
	if s.loader != nil {
		s.loader.Stop()
	}
	s.engine.Stop()
}

// streamAlerts and streamAcker connect the engine to the live stream.
type streamAlerts struct{ e *alert.Engine }

func (a streamAlerts) SubscribeAlerts() (<-chan apollo.Alert, func()) { return a.e.Subscribe() }

type streamAcker struct {
	e     *alert.Engine
	audit *audit.Log
}

func (a streamAcker) Ack(ctx context.Context, p *httpapi.Principal, id string) error {
	if err := a.e.Ack(ctx, p.Tenant, id, p.Name); err != nil {
		return err
	}
	a.audit.Record(audit.Entry{Tenant: p.Tenant, Actor: p.Name, Action: "alert.ack", Target: id, Detail: "from the stream"})
	return nil
}

// saveRules writes rules accepted through the API back to the rules file
// (default tenant only; other tenants' rules live in memory).
func (s *server) saveRules(tenant string, src []byte) error {
	if tenant != "" || s.loader == nil {
		return nil
	}
	return s.loader.Write(src)
}
