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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/agent"
	"github.com/apollo-11/apollo/tui/components"
)

// execReporter reports one apollo exec run through the agent SDK. Every
// failure is a line on stderr, never an error: monitoring must not break
// the job. A nil *execReporter, or one without a task, reports nothing.
type execReporter struct {
	client *agent.Client
	// The drainers send what earlier processes left in other slots, each
	// closed as soon as it has (its slot is then free for other runs), or
	// when drainStop is called at the run's end.
	drainers  sync.WaitGroup
	drainStop context.CancelFunc
	drainMu   sync.Mutex
	drainErrs []error
	lease     *spoolLease
	task      *agent.Task
	taskID    string
	stderr    io.Writer
}

func openExecReporter(cf clientFlags, spoolRoot, taskID, name string, stderr io.Writer) *execReporter {
	r := &execReporter{stderr: stderr}
	log := slog.New(slog.NewTextHandler(&prefixWriter{w: stderr, prefix: "apollo exec: "}, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // the job's own log has the time
			}
			return a
		},
	}))
	opts := []agent.Option{agent.WithToken(cf.token), agent.WithLogger(log)}
	if spoolRoot != "" {
		lease, err := leaseSpool(filepath.Join(spoolRoot, spoolPartition(cf.token)))
		if err != nil {
			r.warnf("%v; reporting without a spool", err)
		} else {
			r.lease = lease
		}
		r.warnStranded(spoolRoot, spoolPartition(cf.token))
	}
	var dir string
	if r.lease != nil {
		dir = r.lease.dir
	}
	c, err := agent.New(cf.server, append(opts, agent.WithSpoolDir(dir))...)
	if err != nil {
		r.warnf("reporting to %s: %v; the command runs unreported", cf.server, err)
		r.lease.release()
		r.lease = nil
		return r
	}
	r.client, r.task, r.taskID = c, c.Task(taskID, name), taskID
	var ctx context.Context
	ctx, r.drainStop = context.WithCancel(context.Background())
	for _, d := range r.orphans() {
		dc, err := agent.New(cf.server, append(opts, agent.WithSpoolDir(d))...)
		if err != nil {
			r.warnf("sending the events left in %s: %v", d, err)
			continue
		}
		// Sent at once, and the slot freed once they are (or at the run's
		// end, the rest kept). A long job held every slot it drained
		// until it ended, and the token's other runs found none free and
		// reported without a spool. Flushed before the close: a client
		// that is closing keeps what a first refusal (429 from the
		// token's rate, a 503) holds back in the spool and stops, where
		// a flush waits and sends again; on a rate-limited token most
		// drainers gave up at once (TestExecFreesTheSlotsItDrained).
		r.drainers.Go(func() {
			_ = dc.Flush(ctx) // ends at the run's end; Close keeps the rest
			err := dc.Close(ctx)
			r.lease.releaseSlot(d)
			if err != nil {
				r.drainMu.Lock()
				r.drainErrs = append(r.drainErrs, err)
				r.drainMu.Unlock()
			}
		})
	}
	return r
}

// spoolPartition is the directory under the spool root for the events
// reported with token: a run sends only what runs with its own token left,
// with that token. Shared slots sent tenant a's runs with the token of
// whichever run came next, into its tenant. The name holds a short hash,
// never the token.
func spoolPartition(token string) string {
	if token == "" {
		return "no-token"
	}
	sum := sha256.Sum256([]byte("apollo exec spool\x00" + token))
	return "token-" + hex.EncodeToString(sum[:8])
}

// warnStranded says which other tokens' events wait under the spool root
// and what to do: this run must not send them (they may be another
// tenant's), and a token rotated or revoked never will.
func (r *execReporter) warnStranded(root, own string) {
	for _, s := range strandedSpools(root, own) {
		r.warnf("%d spool file(s) of events reported with another token wait in %s (the newest from %s): only apollo exec with that token sends them; if that token is gone, send them with a token of the same tenant: apollo spool send --from %s",
			s.Files, s.Dir, s.Newest.Format(time.RFC3339), s.Name)
	}
}

func (r *execReporter) orphans() []string {
	if r.lease == nil {
		return nil
	}
	return r.lease.orphans
}

func (r *execReporter) warnf(format string, args ...any) {
	fmt.Fprintln(r.stderr, "apollo exec:", components.EscapeLines(fmt.Sprintf(format, args...)))
}

// step reports the next state of the run.
func (r *execReporter) step(st apollo.Status, opts ...agent.EventOption) {
	if r == nil || r.task == nil {
		return
	}
	var err error
	switch st {
	case apollo.StatusPending:
		err = r.task.Pending(opts...)
	case apollo.StatusRunning:
		err = r.task.Running(opts...)
	case apollo.StatusSuccess:
		err = r.task.Succeed(opts...)
	case apollo.StatusFailed:
		err = r.task.Fail(opts...)
	case apollo.StatusTimeout:
		err = r.task.Timeout(opts...)
	}
	if err != nil {
		r.warnf("reporting %s: %v", st, err)
	}
}

// close gives the server at most wait to take the events, then leaves the
// rest in the spool (or says they are lost), and frees the spool slots.
func (r *execReporter) close(wait time.Duration) {
	if r == nil || r.client == nil {
		return
	}
	defer r.lease.release()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// The drainers still sending get the same time as the run's client.
	defer context.AfterFunc(ctx, r.drainStop)()
	err := r.client.Close(ctx)
	r.drainers.Wait()
	r.drainStop()
	if err := errors.Join(append([]error{err}, r.drainErrs...)...); err != nil {
		r.warnf("%v", err)
	}
	r.warnDuplicate()
	if r.lease != nil && hasFiles(r.lease.dir) {
		r.warnf("the server did not take every event in time; the rest wait in %s for the next apollo exec", r.lease.dir)
	}
}

// warnDuplicate says when the server already had this run: a task ID
// given again with --task (a re-run, a retry) makes every event of the
// new run a duplicate, and the server keeps the first run's state while
// the command's own exit code says otherwise. It speaks only when the
// answers are about this run alone: the client carried no older events
// (leaseSpool) and resent none (a resend after a lost answer is a
// duplicate too).
func (r *execReporter) warnDuplicate() {
	if r.lease != nil && r.lease.inherited {
		return
	}
	st := r.client.Stats()
	if st.Duplicate == 0 || st.Retries > 0 {
		return
	}
	were := "were"
	if st.Duplicate == 1 {
		were = "was"
	}
	r.warnf(`the server already had the run "%s": %d of this run's events %s answered duplicate and not recorded; give each run its own --task (a retry is a new run)`,
		r.taskID, st.Duplicate, were)
}

func hasFiles(dir string) bool { return len(spoolFiles(dir)) > 0 }

// spoolFiles lists the spool files in a slot: regular files named
// *.ndjson, as the agent reads them. A FIFO, a symlink or a directory of
// that name is no file of events: the agent skips it, and opening a FIFO
// to look at it would wait for a writer for ever.
func spoolFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".ndjson") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// prefixWriter starts every line it writes with prefix. slog handlers
// write one record per Write.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	var buf bytes.Buffer
	for line := range bytes.Lines(b) {
		buf.WriteString(p.prefix)
		buf.Write(line)
	}
	if _, err := p.w.Write(buf.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}
