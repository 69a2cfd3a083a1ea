package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
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
// with the wal package's public reader and decodes every record with
// bus.DecodeRecord. The recount does not go through the bus's replay (the
// code under test): it derives the tasks and counts from the records alone.
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
		r, err := bus.DecodeRecord(p)
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
