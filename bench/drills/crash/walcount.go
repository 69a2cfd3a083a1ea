package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/wal"
)

// logTask is one task as the log tells it: its records in log order.
type logTask struct {
	name    string
	seqs    []int64
	history []apollo.Status
}

// final is the status of the task's last record.
func (t *logTask) final() apollo.Status {
	if len(t.history) == 0 {
		return apollo.StatusNone
	}
	return t.history[len(t.history)-1]
}

// readLog opens the write-ahead log of a stopped server's data directory
// with the wal package's public reader and decodes every record. The
// record encoding is the one bus/codec.go documents (version, kind,
// status, six uvarints, six length-prefixed strings); the bus package keeps
// its decoder private, so this is an independent reading of that format,
// which is the point of a recount.
func readLog(dataDir string) (map[string]*logTask, int, error) {
	l, err := wal.Open(wal.Options{Dir: filepath.Join(dataDir, "wal"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, 0, err
	}
	defer l.Close()
	if lsn, body, err := l.LatestSnapshot(); err != nil || body != nil {
		if body != nil {
			body.Close()
		}
		return nil, 0, fmt.Errorf("the data directory has a snapshot (LSN %d, %v): the log alone is not the whole history; run with a longer snapshot_every", lsn, err)
	}
	tasks := map[string]*logTask{}
	n := 0
	err = l.Replay(0, func(_ wal.LSN, p []byte) error {
		r, err := decodeRecord(p)
		if err != nil {
			return err
		}
		n++
		t := tasks[r.TaskID]
		if t == nil {
			t = &logTask{name: r.Name}
			tasks[r.TaskID] = t
		}
		t.seqs = append(t.seqs, r.Sequence)
		t.history = append(t.history, r.Status)
		return nil
	})
	return tasks, n, err
}

var errShort = errors.New("record truncated")

func decodeRecord(b []byte) (apollo.Record, error) {
	var r apollo.Record
	if len(b) < 3 || b[0] != 1 {
		return r, fmt.Errorf("record of %d bytes, version %v: not the format this drill reads", len(b), b[:min(1, len(b))])
	}
	r.Kind, r.Status = apollo.Kind(b[1]), apollo.Status(b[2])
	if !r.Status.Valid() {
		return r, fmt.Errorf("record with status %d", b[2])
	}
	b = b[3:]
	for _, p := range [...]*int64{&r.Sequence, &r.Ts, &r.ScheduledAt, &r.TimeoutMs, &r.CostMs, &r.ReceivedAt} {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return r, errShort
		}
		*p, b = int64(v), b[n:]
	}
	for _, p := range [...]*string{&r.Tenant, &r.TaskID, &r.Name, &r.Actor, &r.Reason, nil} {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return r, errShort
		}
		if p != nil {
			*p = string(b[n : n+int(l)])
		}
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return r, fmt.Errorf("%d bytes after the record: %w", len(b), io.ErrUnexpectedEOF)
	}
	return r, nil
}

// jobCounts is what GET /api/v1/metrics says about one job.
type jobCounts struct{ Count, Failed, Started, Running int64 }

// recount derives per-job counts from the log: a running record is a start,
// a final record a finished run, a failed one a failure.
func recount(tasks map[string]*logTask) map[string]jobCounts {
	out := map[string]jobCounts{}
	for _, t := range tasks {
		c := out[t.name]
		for _, s := range t.history {
			switch {
			case s == apollo.StatusRunning:
				c.Started++
			case s.Final():
				c.Count++
				if s == apollo.StatusFailed {
					c.Failed++
				}
			}
		}
		if t.final() == apollo.StatusRunning {
			c.Running++
		}
		out[t.name] = c
	}
	return out
}
