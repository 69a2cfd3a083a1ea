package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// A query about one task goes to its partition's owner, which answers from
// its bus: apollo.rpc.<partition>, request-reply, one owner subscribed (a
// queue group, in case two overlap for a moment). A listing goes to every
// node on apollo.rpc.list; each answers for the partitions it serves, and
// the asker merges the pages until every partition has answered.

type rpcRequest struct {
	Op     string        `json:"op"` // get, job, correct, list
	Tenant string        `json:"tenant,omitempty"`
	TaskID string        `json:"taskID,omitempty"`
	Status apollo.Status `json:"status,omitempty"`
	Actor  string        `json:"actor,omitempty"`
	Reason string        `json:"reason,omitempty"`
	Filter *listFilter   `json:"filter,omitempty"`
	Job    string        `json:"job,omitempty"` // openping
}

// listFilter is apollo.TaskFilter on the wire (it has no JSON tags).
type listFilter struct {
	Tenant string        `json:"tenant,omitempty"`
	Prefix string        `json:"prefix,omitempty"`
	Status apollo.Status `json:"status,omitempty"`
	Since  int64         `json:"since,omitempty"`
	Until  int64         `json:"until,omitempty"`
	Limit  int           `json:"limit,omitempty"`
	Cursor string        `json:"cursor,omitempty"`
}

type rpcReply struct {
	Task       *apollo.Task    `json:"task,omitempty"`
	Job        string          `json:"job,omitempty"`
	Tasks      []apollo.Task   `json:"tasks,omitempty"`
	Partitions []int           `json:"partitions,omitempty"`
	Open       *apollo.OpenRun `json:"open,omitempty"` // openping: the newest of the node's partitions
	// More says that the node has tasks after those in Tasks: a
	// partition's bus lists at most 1 000 tasks at a time, one fewer than
	// the limit+1 a page of 1 000 asks for, and so does the node of its
	// partitions' pages together.
	More bool `json:"more,omitempty"`
	// Pieces says that the answer does not fit one message: ask again,
	// taking it in pieces (pieces.go).
	Pieces   bool          `json:"pieces,omitempty"`
	Err      *apollo.Error `json:"err,omitempty"`
	Internal string        `json:"internal,omitempty"` // an internal error, logged where it happened

	// passed counts the history entries and tasks of a newer build's
	// status or kind that the asker passed over (decodeReply).
	passed int
	// unnamed are the tasks of Tasks whose status the asker cannot name,
	// without status or history: not shown, but in the listing order all
	// the same (List).
	unnamed []apollo.Task
}

// local returns the partition if this node serves it.
func (n *Node) local(p int) *partition {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.owned[p]
}

// Get returns a task with its history, from whichever node owns it.
func (n *Node) Get(tenant, taskID string) (*apollo.Task, error) {
	p := Partition(taskID, n.opts.Partitions)
	if pt := n.local(p); pt != nil {
		pt.catchUp(n.opts.QueryTimeout / 4) // as serveTask
		return pt.bus.Get(tenant, taskID)
	}
	r, err := n.ask(context.Background(), p, rpcRequest{Op: "get", Tenant: tenant, TaskID: taskID})
	if err != nil {
		return nil, err
	}
	return r.Task, nil
}

// JobOf returns the job of a task in memory on its owner, "" when there
// is none. When the owner does not answer (a takeover, or too busy) it
// fails with EUNAVAILABLE, saying why as a task read does: a guess would
// be accepted here and refused by the owner for naming another job than
// its task's, an accepted event lost.
func (n *Node) JobOf(tenant, taskID string) (string, error) {
	p := Partition(taskID, n.opts.Partitions)
	if pt := n.local(p); pt != nil {
		pt.catchUp(n.opts.QueryTimeout / 4) // as serveTask
		return pt.bus.JobOf(tenant, taskID)
	}
	r, err := n.ask(context.Background(), p, rpcRequest{Op: "job", Tenant: tenant, TaskID: taskID})
	if err != nil {
		n.warn("finding the job of a nameless event failed; it is answered retry_later", "task", taskID, "err", err)
		why, hint := unavailable(err, "resend the event in a few seconds")
		return "", &apollo.Error{Code: apollo.EUNAVAILABLE, Field: "name",
			Message: "the task's job cannot be looked up now: " + why,
			Hint:    hint + "; or send the event with its job's name"}
	}
	return r.Job, nil
}

// Correct applies a manual correction on the task's owner, where it is
// logged like every decision.
func (n *Node) Correct(ctx context.Context, tenant, taskID string, to apollo.Status, actor, reason string) (*apollo.Task, error) {
	if err := apollo.CheckReason(reason); err != nil {
		return nil, err // before the request, which may not carry a long one
	}
	p := Partition(taskID, n.opts.Partitions)
	if pt := n.local(p); pt != nil {
		pt.catchUp(n.opts.QueryTimeout / 4) // as serveTask
		return pt.bus.Correct(ctx, tenant, taskID, to, actor, reason)
	}
	// The owner answers once the correction is in its decision log, which
	// may take up to PublishTimeout: giving up sooner would answer 503 for
	// a correction the owner goes on to make.
	r, err := n.askWithin(ctx, p, rpcRequest{Op: "correct", Tenant: tenant, TaskID: taskID, Status: to, Actor: actor, Reason: reason},
		n.opts.QueryTimeout+n.opts.PublishTimeout)
	if err != nil {
		return nil, err
	}
	return r.Task, nil
}

// ask sends a request to partition p's owner, waiting QueryTimeout.
func (n *Node) ask(ctx context.Context, p int, req rpcRequest) (*rpcReply, error) {
	return n.askWithin(ctx, p, req, n.opts.QueryTimeout)
}

// askWithin is ask, waiting at most d for the answer.
func (n *Node) askWithin(ctx context.Context, p int, req rpcRequest, d time.Duration) (*rpcReply, error) {
	if !utf8.ValidString(req.TaskID) {
		// JSON would carry it as another ID (each bad byte U+FFFD), which
		// may be a task of the same partition. No task has such an ID:
		// ingest refuses it (apollo.Event.Validate).
		return nil, &apollo.Error{Code: apollo.ENOTFOUND, Field: "taskID", Message: fmt.Sprintf("no task %q", req.TaskID)}
	}
	if e := n.cutOff(); e != nil {
		return nil, e
	}
	data, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	ask := &nats.Msg{Subject: rpcSubject(p), Data: data, Header: nats.Header{}}
	setWithin(ctx, ask)
	m, err := n.opts.Conn.RequestMsgWithContext(ctx, ask)
	if err != nil {
		if e := n.cutOff(); e != nil {
			return nil, e
		}
		return nil, askError(p, d, err)
	}
	r, err := decodeReply(m.Data)
	if err == nil && r.Pieces {
		r, err = n.askInPieces(ctx, p, data, d)
	}
	if err == nil {
		n.warnPassed(r)
	}
	return r, err
}

// warnPassed warns, rate-limited as the node's other warnings, of what an
// answer of a newer node had that this one passed over (decodeReply).
func (n *Node) warnPassed(r *rpcReply) {
	if r.passed > 0 {
		n.warn("a node's answer had history entries or tasks of a status or kind this node does not know; they were passed over, the rest shown: a node of a newer build answered (a rolling upgrade): upgrade this one",
			"passed", r.passed)
	}
}

// askInPieces asks partition p's owner again, on an inbox of its own, for
// an answer too large for one message (pieces.go); ctx ends the wait of d
// that began with the first question.
func (n *Node) askInPieces(ctx context.Context, p int, data []byte, d time.Duration) (*rpcReply, error) {
	nc := n.opts.Conn
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil, fmt.Errorf("cluster: asking partition %d: %w", p, err)
	}
	defer sub.Unsubscribe()
	req := &nats.Msg{Subject: rpcSubject(p), Reply: inbox, Data: data, Header: nats.Header{}}
	req.Header.Set(acceptsPieces, "1")
	setWithin(ctx, req)
	if err := nc.PublishMsg(req); err != nil {
		return nil, fmt.Errorf("cluster: asking partition %d: %w", p, err)
	}
	var j joiner
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, askError(p, d, err)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			return nil, askError(p, d, nats.ErrNoResponders)
		}
		whole, ok, err := j.add(m)
		if err != nil {
			return nil, err
		}
		if ok {
			return decodeReply(whole)
		}
	}
}

// setWithin tells the owner, in withinHeader, how long the asker waits
// for its answer: what is left of ctx's wait.
func setWithin(ctx context.Context, m *nats.Msg) {
	if end, ok := ctx.Deadline(); ok {
		m.Header.Set(withinHeader, strconv.FormatInt(ceilMillis(max(time.Until(end), 0)), 10))
	}
}

// askError is the error of a question to partition p's owner that failed
// after waiting d. No subscriber at all means no node serves p now (its
// owner is changing); one that heard the question and did not answer in
// time may be changing too, or too busy, which the asker cannot tell
// apart (as for a listing: unanswered).
func askError(p int, d time.Duration, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: fmt.Sprintf("partition %d has no owner answering right now", p),
			Hint: "its owner is changing (a node stopped or joined); " + retryAndLook}
	case errors.Is(err, context.DeadlineExceeded):
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: fmt.Sprintf("partition %d did not answer within %v", p, d),
			Hint: "its owner is changing (a node stopped or joined) or too busy to answer in time; " + retryAndLook}
	}
	return fmt.Errorf("cluster: asking partition %d: %w", p, err)
}

// unavailable splits err, a question some partition did not answer, into
// what happened and what to do, for an answer that wraps it; hint is what
// to do when err says nothing (an internal error).
func unavailable(err error, hint string) (why, what string) {
	var ae *apollo.Error
	if errors.As(err, &ae) && ae.Hint != "" {
		return ae.Message, ae.Hint
	}
	return err.Error(), hint
}

// retryAndLook ends the hint of a question some partition did not answer.
const retryAndLook = "retry in a few seconds. Each node's GET /api/v1/system lists the partitions it serves (cluster.leases)"

// decodeReply reads another node's answer, which may be a node of a
// newer build's, in a rolling upgrade. A history entry of a status or
// kind this build has no name for is passed over, alone, and the task
// kept: the task is still this build's to show (its status is one it
// knows), and the types have no value that would show that entry as it
// is; failing the whole answer made the task unreadable through this
// node, and a listing through it fail. A task whose own status this build
// cannot name cannot be shown at all: a listing passes it over, and a
// question about it alone fails with EUNAVAILABLE, saying to read it
// through an upgraded node. r.passed counts what was passed over, for
// the asker's warning (askWithin, askAll).
func decodeReply(data []byte) (*rpcReply, error) {
	var w struct {
		rpcReply
		// The tasks are read one by one, by decodeTask.
		Task  json.RawMessage   `json:"task,omitempty"`
		Tasks []json.RawMessage `json:"tasks,omitempty"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("cluster: a node's answer: %w", err)
	}
	r := &w.rpcReply
	if r.Pieces {
		return r, nil // its Err is for askers before pieces
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if r.Internal != "" {
		return nil, errors.New("cluster: another node failed: " + r.Internal)
	}
	if len(w.Task) > 0 && string(w.Task) != "null" {
		t, err := decodeTask(w.Task, &r.passed)
		if err != nil {
			return nil, err
		}
		r.Task = t
	}
	for _, raw := range w.Tasks {
		t, err := decodeTask(raw, &r.passed)
		var ae *apollo.Error
		switch {
		case errors.As(err, &ae):
			r.passed++ // a task of a newer status: not shown
			r.unnamed = append(r.unnamed, *t)
			continue
		case err != nil:
			return nil, err
		}
		r.Tasks = append(r.Tasks, *t)
	}
	return r, nil
}

// decodeTask reads a task of another node's answer: at once when this
// build can name everything in it, else field by field, passing over
// (counted in passed) the history entries it cannot read. A task whose
// own status it cannot name is an apollo.Error, with the task as far as
// it reads, without status or history (decodeReply).
func decodeTask(raw json.RawMessage, passed *int) (*apollo.Task, error) {
	t := new(apollo.Task)
	if json.Unmarshal(raw, t) == nil {
		return t, nil
	}
	var w struct {
		apollo.Task
		Status  string            `json:"status"`
		History []json.RawMessage `json:"history,omitempty"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("cluster: a node's answer: %w", err)
	}
	*t = w.Task
	t.History = nil
	if err := t.Status.UnmarshalText([]byte(w.Status)); err != nil {
		return t, &apollo.Error{Code: apollo.EUNAVAILABLE,
			Message: fmt.Sprintf("task %q has a status this node does not know (%q): a node of a newer build answered", w.TaskID, w.Status),
			Hint:    "read it through an upgraded node, or upgrade this one"}
	}
	for _, h := range w.History {
		var rec apollo.Record
		if json.Unmarshal(h, &rec) != nil {
			*passed++
			continue
		}
		t.History = append(t.History, rec)
	}
	return t, nil
}

// serveTask answers a query about a task of pt, unless its asker has
// stopped waiting: a partition's owner answers them one at a time, as a
// node answers questions to every node (listing.go), and one may wait
// behind slow answers past its asker's wait.
func (n *Node) serveTask(pt *partition, q question) {
	m := q.m
	var req rpcRequest
	var r rpcReply
	var err error
	if n.skipLate(q, "a question about a task", "partition", pt.id) {
		return
	}
	if n.opts.testServeTaskHook != nil {
		n.opts.testServeTaskHook()
	}
	if err = json.Unmarshal(m.Data, &req); err == nil {
		// What the asker's caller was answered accepted before it asked
		// is decided before the answer, as on one server: a task read, the
		// job a nameless event is checked against, and the state a
		// correction starts from include it (caughtup.go).
		pt.catchUp(n.opts.QueryTimeout / 4)
		switch req.Op {
		case "get":
			r.Task, err = pt.bus.Get(req.Tenant, req.TaskID)
		case "job":
			r.Job, _ = pt.bus.JobOf(req.Tenant, req.TaskID)
		case "correct":
			// Not n.ctx: Stop cancels it first, and the partition answers
			// until it is handed over, its log flushed then. The bus makes
			// the correction before it waits for the log, so a wait cut
			// short answered an error for a correction made
			// (TestCorrectionWhileItsOwnerStops).
			ctx, cancel := context.WithTimeout(context.Background(), n.opts.PublishTimeout)
			r.Task, err = pt.bus.Correct(ctx, req.Tenant, req.TaskID, req.Status, req.Actor, req.Reason)
			cancel()
		default:
			err = fmt.Errorf("unknown operation %q", req.Op)
		}
	}
	n.reply(m, &r, err)
}

func (n *Node) reply(m *nats.Msg, r *rpcReply, err error) {
	if err != nil {
		var ae *apollo.Error
		if errors.As(err, &ae) {
			r.Err = ae
		} else {
			n.log.Error("answering a query", "subject", m.Subject, "err", err)
			r.Internal = "see the log of node " + n.opts.NodeID
		}
	}
	data := marshalReply(r)
	if !n.respond(m, data) {
		// Err tells an asker of a version before pieces, which reads no
		// Pieces, why it has no answer.
		data, _ = json.Marshal(rpcReply{Pieces: true, Err: &apollo.Error{Code: apollo.EUNAVAILABLE,
			Message: fmt.Sprintf("the answer (%d bytes) is larger than one NATS message", len(data)),
			Hint:    "ask a node of the same version as the owner, or raise the NATS server's max_payload"}})
		n.respond(m, data)
	}
}

// marshalReply is an answer's JSON as the API writes it (httpapi's
// writeJSON): '<', '>' and '&' as they are. json.Marshal would write them
// as \u003c, \u003e and \u0026, which a task's extra (a
// json.RawMessage) keeps, so an extra read through another node than its
// owner would not be the bytes reported.
func marshalReply(r *rpcReply) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(r)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Stats sums the bus stats of the partitions this node serves (the shape
// GET /api/v1/system and /metrics show for one bus); its counters add
// those of the partitions that left the node, so they count since the
// process started and never go down at a handover.
func (n *Node) Stats() bus.Stats {
	n.mu.Lock()
	t := n.left
	parts := make([]*partition, 0, len(n.counted))
	for _, pt := range n.counted {
		parts = append(parts, pt)
	}
	n.mu.Unlock()
	for _, pt := range parts {
		s := pt.bus.Stats()
		addCounters(&t, s)
		t.Tasks += s.Tasks
		t.Queues += s.Queues
		t.Queued += s.Queued
		t.Holding += s.Holding
		t.HoldLimit += s.HoldLimit
		t.Waiting += s.Waiting
		t.Tombstones += s.Tombstones
		t.Deadlines += s.Deadlines
	}
	return t
}

// addCounters adds the counters of s (not its gauges) to t.
func addCounters(t *bus.Stats, s bus.Stats) {
	t.Accepted += s.Accepted
	t.Duplicate += s.Duplicate
	t.Illegal += s.Illegal
	t.Invalid += s.Invalid
	t.Held += s.Held
	t.Refused += s.Refused
	t.Parked += s.Parked
	t.WaitEnded += s.WaitEnded
	t.Timeouts += s.Timeouts
	t.MissedStart += s.MissedStart
	t.Corrections += s.Corrections
	t.Evicted += s.Evicted
	t.Replayed += s.Replayed
	t.LogErrors += s.LogErrors
}

// uncount moves a stopped partition's counters from counted to left.
func (n *Node) uncount(pt *partition) {
	s := pt.bus.Stats()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.counted[pt.id] == pt {
		delete(n.counted, pt.id)
		addCounters(&n.left, s)
	}
}

// NodeStats describe the node and the partitions it serves.
type NodeStats struct {
	Node string `json:"node"`
	// NATS is the state of the node's connection to NATS: connected,
	// reconnecting (cut off: every event and question is refused at once,
	// cutoff.go), closed.
	NATS       string           `json:"nats"`
	Leases     []int            `json:"leases"` // held, serving or being rebuilt
	Partitions []PartitionStats `json:"partitions"`
	// LateQuestions counts the questions to every node (listings, ping
	// ends) and those about one task (reads, nameless events' jobs,
	// corrections) the node skipped because their askers had stopped
	// waiting (listing.go): it answers them slower than they come.
	LateQuestions uint64 `json:"late_questions"`
	// LogForeign counts the messages on the partitions' decision logs
	// that no owner wrote, passed over by the rebuilds that read them
	// (logreplay.go); each rebuild counts those it reads.
	LogForeign uint64 `json:"log_foreign"`
	// OpenFailures are the partitions this node failed to rebuild and
	// claims again later (openretry.go), by partition; empty when none.
	OpenFailures []OpenFailure `json:"open_failures"`
}

// NodeStats returns the node's leases and its partitions' stats.
func (n *Node) NodeStats() NodeStats {
	n.mu.Lock()
	s := NodeStats{Node: n.opts.NodeID, NATS: n.natsState(), LateQuestions: n.lateQuestions.Load(),
		LogForeign: n.logForeign.Load()}
	parts := make([]*partition, 0, len(n.owned))
	for p := range n.leases {
		s.Leases = append(s.Leases, p)
	}
	for _, pt := range n.owned {
		parts = append(parts, pt)
	}
	s.OpenFailures = n.openFailures()
	n.mu.Unlock()
	slices.Sort(s.Leases)
	slices.SortFunc(s.OpenFailures, func(a, b OpenFailure) int { return a.Partition - b.Partition })
	slices.SortFunc(parts, func(a, b *partition) int { return a.id - b.id })
	for _, pt := range parts {
		s.Partitions = append(s.Partitions, pt.stats())
	}
	return s
}
