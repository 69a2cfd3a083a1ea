package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/apollo-11/apollo/internal/atomicfile"
	"github.com/apollo-11/apollo/internal/sourcefile"
	"github.com/apollo-11/apollo/redisstore"
)

// writerFile names, in the bus's data directory, the writer ID under
// which the three-process bus writes its metrics to Redis
// (redisstore.Options.Writer): it belongs to the log, as the counts do.
const writerFile = "metrics-writer"

// metricsWriter decides the writer ID of the three-process bus whose log
// ends at lastLSN, and the writers to retire (docs/redis.md, "A bus on a
// new data directory"). Each bus writes its log's counts as absolute
// values, whole 10-minute blocks at a time; a bus on a new data directory
// writing as the old one did would replace the old log's counts in Redis
// with its own (a rate alert told resolved while its failure was still in
// the window). So:
//
//   - the ID saved in the data directory is kept: a writer keeps its ID
//     across restarts, or its counts are summed twice;
//   - a log that has records and no saved ID wrote as "", the one writer
//     of the releases before: it keeps "" (an upgrade);
//   - a new log writes as "" unless Redis followed another log that had
//     records (the change feed's saved mark is above 0) and holds metrics
//     (a writer is announced): then it takes an ID of its own, and the old
//     counts stay beside its own, summed, until they leave their windows.
//
// The ID is saved before anything is written under it. Every other writer
// announced is retired: its gauge levels are dropped from the jobs this
// bus writes, since the tasks they count are in a log no bus holds.
func metricsWriter(ctx context.Context, c redis.UniversalClient, prefix, dir string, lastLSN uint64, log *slog.Logger) (writer string, retire []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	path := filepath.Join(dir, writerFile)
	// Bounded: an ID is at most MaxWriterBytes; a file far past that
	// (a link to /dev/zero) would otherwise be read until memory ran out.
	b, err := sourcefile.ReadOwn(path, "metrics writer file", 4096)
	saved := err == nil
	switch {
	case errors.As(err, new(*sourcefile.TooLargeError)), errors.As(err, new(*sourcefile.NotFileError)):
		return "", nil, fmt.Errorf("%w: put back the ID this data directory's bus wrote as (its fields end in @<ID> in Redis; an empty file for none)", err)
	case saved:
		writer = strings.TrimSpace(string(b))
		if !redisstore.ValidWriter(writer) {
			return "", nil, fmt.Errorf("%s holds %q, not a metrics writer ID (up to %d letters, digits, '.', '_' or '-'): put back the ID this data directory's bus wrote as (its fields end in @<ID> in Redis; an empty file for none)",
				path, clipWriter(writer), redisstore.MaxWriterBytes)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return "", nil, fmt.Errorf("reading %s: %w (make it readable by this user)", path, err)
	}
	writers, err := redisstore.Writers(ctx, c, prefix)
	switch {
	case err != nil && (saved || lastLSN > 0):
		// Its ID is known: only the other logs' levels wait for the
		// next start to be dropped.
		log.Warn("the metrics' writers could not be read from Redis: the levels of another log's tasks are not dropped until the next start", "err", err)
	case err != nil:
		return "", nil, fmt.Errorf("%w (the bus, on a new data directory, reads them to keep another log's metrics apart from its own; check that Redis answers at redis.url)", err)
	}
	if !saved && lastLSN == 0 && len(writers) > 0 {
		mark, ok, err := redisstore.FeedMark(ctx, c, prefix)
		if err != nil {
			return "", nil, fmt.Errorf("reading the change feed's mark from Redis: %w (check redis.url)", err)
		}
		if ok && mark > 0 {
			var id [8]byte
			_, _ = rand.Read(id[:])
			writer = "log-" + hex.EncodeToString(id[:])
			log.Warn("the data directory is new and Redis holds the metrics of another log: this bus writes its own beside them; the old counts are kept until they leave their windows, and the old tasks pending and running are no longer counted",
				"dir", dir, "writer", writer, "otherWriters", writers, "otherLogMark", mark)
		}
	}
	if !saved {
		if err := atomicfile.Write(path, []byte(writer+"\n"), 0o600); err != nil {
			return "", nil, fmt.Errorf("saving the metrics writer ID: %w%s", err, unusableDir(err, dir))
		}
	}
	retire = slices.DeleteFunc(writers, func(w string) bool { return w == writer || !redisstore.ValidWriter(w) })
	return writer, retire, nil
}

func clipWriter(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
