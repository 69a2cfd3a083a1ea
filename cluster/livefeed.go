package cluster

import (
	"context"
	"log/slog"
	"math"

	"github.com/apollo-11/apollo/bus"
)

// A partition's changes reach the alert processes' event rules through a
// LiveFeed (cmd/apollo: a part of redisstore's change feed), which keeps,
// with what it wrote, the partition's mark: the LSN up to which every
// change was written, and the LSNs above it that were written too. The
// owner that takes the partition next (another node, or this one
// restarted after kill -9) reads them (Resume) and its replay of the
// decision log hands the feed the changes above the mark again, minus the
// ones written: a change a node applied and was killed before its feed
// wrote it is told, and none is told twice (docs/architecture.md, "A
// scale-out node keeps the promise per partition").
//
// The LSNs must therefore name the same records whichever node numbers
// them: a partition's LSN is the number of records in its decision log
// from its start, carried across a snapshot by the marker's Apollo-LSN
// (snapshot.go).

// LiveFeed tells the alert processes of one partition's changes. Apply is
// a live observer's (it also sees the changes above Resume's mark that
// the replay hands over when the partition is taken).
type LiveFeed interface {
	bus.Observer
	// Resume reads the partition's saved mark, before the replay: the
	// LSN above which the replay hands the changes over
	// (bus.Bus.ReplayLiveAfter); math.MaxUint64 when none was saved (the
	// partition is new to the feed: nothing is replayed, as before).
	Resume(ctx context.Context) (uint64, error)
	// Replayed says where the replay ended: a saved mark above it is
	// another log's (the streams were recreated) and is forgotten.
	Replayed(end uint64)
	// Save writes what the feed holds and the partition's mark now: the
	// partition calls it once taken, and before it keeps a snapshot (the
	// next owner replays only the log after it).
	Save(ctx context.Context) error
	// Close saves a last time and forgets the partition.
	Close(ctx context.Context) error
}

// FeedConfig is what Options.Feed gets for one partition.
type FeedConfig struct {
	Partition int
	// Mark is the partition bus's live watermark (bus.Bus.LiveWatermark).
	Mark   func() uint64
	Logger *slog.Logger
}

// resumeFeed reads the feed's mark for the replay; without a feed, or
// when it cannot be read, the replay hands the feed nothing.
func (pt *partition) resumeFeed(ctx context.Context) {
	if pt.feed == nil {
		return
	}
	from, err := pt.feed.Resume(ctx)
	if err != nil {
		pt.log.Warn("the change feed's mark could not be read: changes the owner before applied just before it died may not reach the event rules", "err", err)
		from = math.MaxUint64
	}
	pt.bus.ReplayLiveAfter(from)
}

// saveFeed saves the feed's mark (what, when is in the log line).
func (pt *partition) saveFeed(ctx context.Context, when string) error {
	if pt.feed == nil {
		return nil
	}
	err := pt.feed.Save(ctx)
	if err != nil {
		pt.log.Warn("the change feed's mark could not be saved "+when, "err", err)
	}
	return err
}
