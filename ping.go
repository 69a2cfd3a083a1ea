package apollo

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Ping URLs let a cron line that has only curl report its runs
// (docs/protocol.md, "Pings"):
//
//	/ping/backup/start   a run began
//	/ping/backup         it succeeded
//	/ping/backup/fail    it failed
//	/ping/backup/3       it ended with exit code 3 (0 = success)
//
// The pings carry no run ID and no sequence: the server names the runs
// and numbers their events, and pairs an end with the job's open run.
// These are the rules; the bus keeps the open runs (bus.Bus.Ping).

// Ping is one request to a ping URL.
type Ping struct {
	Tenant string
	Job    string
	// Status is running for a start, success or failed for an end.
	Status Status
	// Ts is when the server took the ping, Unix ms: the event's time, and
	// the time in the name of a run it begins.
	Ts int64
	// TimeoutMs is the deadline a start gives its run (?timeout=); 0: the
	// job's default.
	TimeoutMs int64
	Extra     json.RawMessage
}

// OpenRun is a ping run still running: what an end pairs with.
type OpenRun struct {
	TaskID   string
	Sequence int64 // its last
	// CreatedAt orders the open runs of a job: an end pairs with the
	// newest (then the highest task ID, as listings order them).
	CreatedAt int64
}

// Newer reports whether r comes before o in the listing order: first
// reported later, or at the same time with a higher task ID.
func (r OpenRun) Newer(o OpenRun) bool {
	if r.CreatedAt != o.CreatedAt {
		return r.CreatedAt > o.CreatedAt
	}
	return r.TaskID > o.TaskID
}

const pingMark = "@ping-"

// PingRunID names the run a ping begins: its job, and the time of the
// ping in Unix ms. Job names hold no "@", so the name says whose it is.
func PingRunID(job string, ms int64) string {
	return job + pingMark + strconv.FormatInt(ms, 10)
}

// IsPingRun reports whether taskID names a ping run of job.
func IsPingRun(taskID, job string) bool {
	rest, ok := strings.CutPrefix(taskID, job)
	return ok && job != "" && strings.HasPrefix(rest, pingMark)
}

// Event is the event p reports. A start begins a new run (sequence 1). An
// end pairs with the job's open run when there is one (ok): the run's next
// event. An end with none is a run reported only by its end: finished, its
// start unknown.
func (p *Ping) Event(open OpenRun, ok bool) Event {
	ev := Event{TaskID: PingRunID(p.Job, p.Ts), Name: p.Job, Tenant: p.Tenant, Sequence: 1,
		Status: p.Status, Ts: p.Ts, Extra: p.Extra}
	switch {
	case p.Status == StatusRunning:
		ev.TimeoutMs = p.TimeoutMs
	case ok:
		ev.TaskID, ev.Sequence = open.TaskID, open.Sequence+1
	}
	return ev
}
