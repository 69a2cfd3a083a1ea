package wal

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	apollo "github.com/apollo-11/apollo"
)

// LSN is a log sequence number: 1 for the first record ever written, +1 per
// record. 0 means "none".
type LSN uint64

// SyncPolicy says when an appended record counts as durable.
type SyncPolicy string

const (
	// SyncBatch is group commit: an LSN is durable once an fsync covering it
	// has returned. One fsync covers every record that arrived while the
	// previous one ran.
	SyncBatch SyncPolicy = "batch"
	// SyncInterval fsyncs every Options.SyncInterval; Wait returns once the
	// record is written to the OS (it survives a process crash, not a power
	// loss within the interval).
	SyncInterval SyncPolicy = "interval"
	// SyncOff never fsyncs (the OS decides, except at segment roll, snapshot
	// and Close); Wait returns once the record is written to the OS.
	SyncOff SyncPolicy = "off"
)

// ParseSyncPolicy parses "batch", "interval" or "off" (case-insensitive;
// empty means batch).
func ParseSyncPolicy(s string) (SyncPolicy, error) {
	switch p := SyncPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case "":
		return SyncBatch, nil
	case SyncBatch, SyncInterval, SyncOff:
		return p, nil
	}
	return "", &apollo.Error{
		Code:    apollo.EINVALID,
		Field:   "sync",
		Message: fmt.Sprintf("unknown sync policy %q", s),
		Hint:    `use "batch" (durable on acknowledge), "interval" or "off"`,
	}
}

// Limits and defaults.
const (
	// MaxRecordSize is the largest payload Append accepts.
	MaxRecordSize = 1 << 20
	// DefaultSegmentSize is the size past which the log rolls to a new segment.
	DefaultSegmentSize = 64 << 20
	// DefaultSyncInterval is the fsync period of the SyncInterval policy.
	DefaultSyncInterval = 100 * time.Millisecond
	// maxPending bounds the unflushed group-commit buffer: past it, Append
	// blocks until the flusher has taken the buffer (backpressure).
	maxPending = 8 << 20
)

// Options configure Open. Only Dir is required.
type Options struct {
	Dir          string        // required; created if missing
	Sync         SyncPolicy    // default SyncBatch
	SyncInterval time.Duration // default 100ms (SyncInterval policy only)
	SegmentSize  int64         // roll to a new segment file past this; default 64 MiB
	Logger       *slog.Logger  // default slog.Default()
	Clock        apollo.Clock  // drives the SyncInterval ticker and sync timing; default apollo.SystemClock

	// hooks is a test seam: it wraps segment files and observes fsyncs.
	hooks *hooks
}

// hooks lets the package's tests watch and break the flusher's file I/O.
type hooks struct {
	wrap      func(f *os.File, first LSN, size int64) segmentFile // wraps every segment file opened for writing; its records end at size
	afterSync func()                                              // called by the flusher after each successful fsync
	blocked   func()                                              // called, under the lock, when an Append blocks on backpressure
}

func (o Options) withDefaults() Options {
	o.Sync = cmp.Or(o.Sync, SyncBatch)
	o.SyncInterval = cmp.Or(o.SyncInterval, DefaultSyncInterval)
	o.SegmentSize = cmp.Or(o.SegmentSize, DefaultSegmentSize)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = apollo.SystemClock
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	if o.Dir == "" {
		errs = append(errs, invalid("dir", "the data directory is empty", "set the wal directory, e.g. /var/lib/apollo/wal"))
	}
	if _, err := ParseSyncPolicy(string(o.Sync)); err != nil {
		errs = append(errs, err)
	}
	if o.SyncInterval < 0 {
		errs = append(errs, invalid("sync_interval", fmt.Sprintf("negative interval %s", o.SyncInterval), "use a positive duration such as 100ms"))
	}
	if o.SegmentSize < 4096 {
		errs = append(errs, invalid("segment_size", fmt.Sprintf("%d bytes is too small", o.SegmentSize), "use at least 4096 bytes; the default is 64 MiB"))
	}
	return errors.Join(errs...)
}

func invalid(field, msg, hint string) *apollo.Error {
	return &apollo.Error{Code: apollo.EINVALID, Field: "wal." + field, Message: msg, Hint: hint}
}

// Sentinel errors; match them with errors.Is.
var (
	// ErrClosed is returned by Append and WriteSnapshot after Close.
	ErrClosed = errors.New("wal: log is closed")
	// ErrCorrupt means a segment or snapshot failed its checks somewhere a
	// torn write cannot explain. The wrapping *CorruptError says where.
	ErrCorrupt = errors.New("wal: corrupt")
	// ErrGap means Replay was asked for records that were already removed
	// after a snapshot.
	ErrGap = errors.New("wal: gap")
	// ErrMoved is returned by WriteSnapshot when the log's directory is no
	// longer the one Open locked: moved, replaced or removed while the log
	// was open (a restore over a running server). The log's open files
	// are no longer there; a snapshot written by name would land in what
	// replaced them.
	ErrMoved = errors.New("wal: directory replaced")
	// ErrTooLarge is returned by Append for a payload over MaxRecordSize.
	ErrTooLarge = errors.New("wal: record too large")
)

// CorruptError names the damaged file and offset and says what an operator
// can do about it. It matches ErrCorrupt.
type CorruptError struct {
	Path   string
	Offset int64
	Reason string
	Hint   string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt: %s at offset %d: %s (%s)", e.Path, e.Offset, e.Reason, e.Hint)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// hintCorrupt is what an operator can do about damage before the tail.
const hintCorrupt = "restore the data directory from a backup, or move this segment and every later one out of the directory to accept losing their records"
