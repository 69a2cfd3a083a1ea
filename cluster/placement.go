package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultPlacementWait is how long Start and OpenAudit wait for JetStream
// to place what they create: a NATS cluster that is still starting, or
// with a server down, has too few peers for the copies asked.
const DefaultPlacementWait = time.Minute

// notPlacedYet tells the answers of a NATS cluster that cannot place a
// stream's copies now but may in a moment: too few peers online ("no
// suitable peers for placement"), or no meta leader yet ("JetStream system
// temporarily unavailable").
func notPlacedYet(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return false
	}
	return api.ErrorCode == errCodeNoPeers || api.ErrorCode == errCodeUnavailable
}

// JetStream's codes of a placement that may succeed in a moment
// (nats-server's JSClusterNoPeersErrF and JSClusterNotAvailErr).
const (
	errCodeNoPeers     jetstream.ErrorCode = 10005
	errCodeUnavailable jetstream.ErrorCode = 10008
)

// untilPlaced runs create until it succeeds, fails otherwise than by
// notPlacedYet, ctx ends or wait has passed, and logs each wait once.
// create must be idempotent (a CreateOrUpdate). Before, a node started
// while a server of a NATS cluster of three was down or still joining
// exited at once with "no suitable peers for placement, peer offline".
func untilPlaced(ctx context.Context, log *slog.Logger, wait time.Duration, replicas int, create func() error) error {
	deadline := time.Now().Add(wait)
	pause := 100 * time.Millisecond
	for logged := false; ; {
		err := create()
		if err == nil || !notPlacedYet(err) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: waited %s for JetStream to place %d copies: start every server of the NATS cluster; %d copies need %d servers with JetStream (docs/scale-out.md)",
				err, wait, replicas, replicas, replicas)
		}
		if !logged {
			log.Warn("waiting for JetStream to place the streams' copies (is every server of the NATS cluster up?)",
				"replicas", replicas, "err", err, "up_to", left.Round(time.Second))
			logged = true
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (stopped while waiting for JetStream to place %d copies)", err, replicas)
		case <-t.C:
		}
		pause = min(2*pause, 2*time.Second)
	}
}
