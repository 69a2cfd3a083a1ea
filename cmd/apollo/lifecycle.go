package main

import (
	"context"
	"errors"
	"log/slog"
)

// service is every long-running component as cmd/apollo starts and stops
// it, the one way docs/architecture.md ("Lifecycle") writes down: Start
// once; Stop(ctx) stops its goroutines and waits for them or for ctx, and
// returns what went wrong. The bus, the metrics, the stream hub, the
// alert engine, its loader, the dispatcher, the redisstore loops, the
// scheduler, the cluster node and each process's alerting side are one.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// startService starts svc and has undo stop it if a later start-up step
// fails.
func startService(ctx context.Context, undo *undoList, log *slog.Logger, name string, svc service) error {
	if err := svc.Start(ctx); err != nil {
		return err
	}
	undo.add(func() { stopService(context.Background(), log, name, svc) })
	return nil
}

// stopService stops svc, waiting for it until ctx ends, and logs and
// returns its error: a component that could not finish its last work (a
// flush, a save, a release) says so at shutdown.
func stopService(ctx context.Context, log *slog.Logger, name string, svc service) error {
	err := svc.Stop(ctx)
	if err != nil {
		log.Warn("stopping "+name, "err", err)
	}
	return err
}

// namedService is a service and what the log calls it.
type namedService struct {
	name string
	svc  service
}

// startAll starts svcs in order; when one fails, those started are stopped
// again, newest first.
func startAll(ctx context.Context, log *slog.Logger, svcs []namedService) error {
	var undo undoList
	for _, s := range svcs {
		if err := startService(ctx, &undo, log, s.name, s.svc); err != nil {
			undo.run()
			return err
		}
	}
	return nil
}

// stopAll stops svcs newest first, each waiting until ctx ends, and
// returns their errors.
func stopAll(ctx context.Context, log *slog.Logger, svcs []namedService) error {
	var errs []error
	for i := len(svcs) - 1; i >= 0; i-- {
		errs = append(errs, stopService(ctx, log, svcs[i].name, svcs[i].svc))
	}
	return errors.Join(errs...)
}
