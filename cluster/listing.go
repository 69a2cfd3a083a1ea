package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// Questions to every node on apollo.rpc.list (query.go): a listing (List)
// and a job's open ping run (ping.go) are asked with askAll and answered by
// serveAll.

// List returns the tasks in memory on every node that match f, in the
// bus's listing order, like bus.Bus.List over one bus; the cursor is the
// bus's own.
//
// A page holds limit tasks whenever more follow, and its cursor passes
// over none, even where some tasks are not shown: in a rolling upgrade
// an owner of a newer build may answer tasks of a status this node cannot
// name (decodeReply). Those keep their place in the order all the same
// (listFrom), and when too few tasks are left to show, the node asks for
// the next ones, from after the last it was answered, until the page is
// full or nothing follows. Before, it merged the answers as if those
// tasks were not there: a page came back short without a cursor (the
// listing looked ended), or went on past tasks an owner's answer had no
// room for, which the cursor then skipped
// (TestPagesAreFullAroundTasksThisNodeCannotName).
func (n *Node) List(f apollo.TaskFilter) ([]apollo.Task, string, error) {
	limit := f.Limit
	if limit <= 0 || limit > maxListPage {
		limit = 100
	}
	f.Limit = limit
	if f.Cursor != "" {
		if err := bus.CheckCursor(f.Cursor); err != nil {
			return nil, "", err
		}
	}
	var page []apollo.Task
	for from := f.Cursor; ; {
		want := limit + 1 - len(page) // one more says whether a next page exists
		seen, full, err := n.listFrom(f, from, want)
		if err != nil {
			return nil, "", err
		}
		for _, e := range seen {
			if e.named {
				page = append(page, e.Task)
			}
		}
		// A page of maxListPage cannot hold the one more: a full answer
		// says that tasks follow, as a partition's bus says it (More).
		if len(page) > limit || full && len(page) == limit && want > maxListPage {
			page = page[:limit]
			return page, bus.PageCursor(&page[limit-1]), nil
		}
		if !full || len(seen) == 0 {
			return page, "", nil
		}
		from = bus.PageCursor(&seen[len(seen)-1].Task)
	}
}

// listed is a task of a listing, and whether this node can name its
// status (show it).
type listed struct {
	apollo.Task
	named bool
}

// listFrom asks every node for the first want tasks that match f after
// the cursor from, and returns those certainly first in listing order,
// and whether more may follow them (full). Each node answers the first
// want of its partitions (at most maxListPage), so when an answer holds
// that many, or says its partitions have more, the tasks after its last
// were not sent, and may come before some another node sent: only the
// first min(want, maxListPage) of all are certain.
func (n *Node) listFrom(f apollo.TaskFilter, from string, want int) ([]listed, bool, error) {
	var tasks []listed
	full := false
	err := n.askAll(rpcRequest{Op: "list", Filter: &listFilter{Tenant: f.Tenant, Prefix: f.Prefix, Status: f.Status,
		Since: f.Since, Until: f.Until, Limit: want, Cursor: from}}, func(r *rpcReply) {
		for _, tk := range r.Tasks {
			tasks = append(tasks, listed{tk, true})
		}
		for _, tk := range r.unnamed {
			tasks = append(tasks, listed{tk, false})
		}
		full = full || r.More || len(r.Tasks)+len(r.unnamed) >= want
	})
	if err != nil {
		return nil, false, err
	}
	tasks = newest(tasks)
	slices.SortFunc(tasks, func(a, b listed) int { return listOrder(&a.Task, &b.Task) })
	if full {
		tasks = tasks[:min(len(tasks), want, maxListPage)]
	}
	return tasks, full, nil
}

// newest keeps one copy of each task: while a partition changes hands,
// its old owner (whose lease is lost but whose local deadline has not
// passed) and its new one may both answer, and a page would show the task
// twice. The copy kept is the one changed last, the new owner's.
func newest(tasks []listed) []listed {
	type id struct{ tenant, task string }
	at := make(map[id]int, len(tasks))
	out := tasks[:0]
	for _, tk := range tasks {
		k := id{tk.Tenant, tk.TaskID}
		i, dup := at[k]
		switch {
		case !dup:
			at[k] = len(out)
			out = append(out, tk)
		case tk.Sequence > out[i].Sequence || tk.Sequence == out[i].Sequence && tk.UpdatedAt > out[i].UpdatedAt:
			out[i] = tk
		}
	}
	return out
}

// askAll sends req to every node on apollo.rpc.list and calls fn with each
// answer until every partition has been answered for.
func (n *Node) askAll(req rpcRequest, fn func(r *rpcReply)) error {
	if e := n.cutOff(); e != nil {
		return e
	}
	data, _ := json.Marshal(req)
	nc := n.opts.Conn
	inbox := nc.NewRespInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return fmt.Errorf("cluster: asking every node (%s): %w", req.Op, err)
	}
	defer sub.Unsubscribe()
	ask := &nats.Msg{Subject: rpcList, Reply: inbox, Data: data, Header: nats.Header{}}
	ask.Header.Set(acceptsPieces, "1") // several answer: each may come in pieces (pieces.go)
	ask.Header.Set(withinHeader, strconv.FormatInt(ceilMillis(n.opts.QueryTimeout), 10))
	if err := nc.PublishMsg(ask); err != nil {
		return fmt.Errorf("cluster: asking every node (%s): %w", req.Op, err)
	}
	var j joiner
	covered := make([]bool, n.opts.Partitions)
	left := n.opts.Partitions
	// Real time, not the node's clock: NextMsg waits in real time, as
	// ask's context does; with a fake clock that does not move, each
	// answer would start the whole QueryTimeout again.
	deadline := time.Now().Add(n.opts.QueryTimeout)
	for left > 0 {
		m, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			if e := n.cutOff(); e != nil {
				return e
			}
			return n.unanswered(covered, left)
		}
		whole, ok, err := j.add(m)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		r, err := decodeReply(whole)
		if err != nil {
			return err
		}
		n.warnPassed(r)
		for _, p := range r.Partitions {
			if p >= 0 && p < len(covered) && !covered[p] {
				covered[p] = true
				left--
			}
		}
		fn(r)
	}
	return nil
}

// unanswered is the error of a question to every node that some
// partitions did not answer in time: which ones, and how long the asker
// waited. Nothing tells the asker why: a partition changing owner and an
// owner too busy to answer within QueryTimeout (a loaded machine, an
// answer of megabytes) look the same from here.
func (n *Node) unanswered(covered []bool, left int) error {
	const named = 8 // a cluster of 1 024 partitions does not get them all
	var missing []string
	for p, ok := range covered {
		if !ok && len(missing) < named {
			missing = append(missing, strconv.Itoa(p))
		}
	}
	list := strings.Join(missing, ", ")
	if left > named {
		list += ", …"
	}
	what := "partitions " + list
	if left == 1 {
		what = "partition " + list
	}
	return &apollo.Error{Code: apollo.EUNAVAILABLE,
		Message: fmt.Sprintf("%s (%d of %d) did not answer within %v", what, left, len(covered), n.opts.QueryTimeout),
		Hint:    "their owner is changing (a node stopped or joined) or too busy to answer in time; " + retryAndLook}
}

// A node answers questions to every node one at a time, in the order they
// came (and a partition's owner those about the partition's tasks, the
// same way: serveTask). One can wait there behind slow answers (a loaded
// machine, pages of megabytes) past the time its asker waits, which has
// then answered 503: answering it would only keep the node from the
// questions after it. So each question says how long its asker waits
// (withinHeader), each is stamped by this node's clock as it comes (hear:
// NATS's callback queue, where the stamp could not be taken, is passed
// through at once, up to maxQueuedQuestions waiting: questions.go), and
// serveAll (serveTask) skips a question whose wait has passed since. The wait is
// relative, counted from when the question came here, so the nodes'
// clocks need not agree; the time the question took to get here is not
// counted, so the node may still answer a question just given up, never
// skip one still waited for. A question of a release before
// withinHeader carries none, and is answered however long it waited, as
// that release's nodes answer this one's, ignoring the header.

// question is a question to every node or about a task, and when this
// node heard it.
type question struct {
	m     *nats.Msg
	heard time.Time
}

// listen starts answering questions to every node: apollo.rpc.list's
// callback stamps each and queues it, and a goroutine answers them (Stop
// waits for it, with the partitions' answerers). They answer until
// stopListening, which Stop calls once the partitions are handed over:
// until then a listing is answered for the partitions the node still
// serves, as are questions about their tasks (lease.go, open). Before,
// listings went unanswered from the moment Stop began, and every
// listing through any node answered 503 during a graceful handover
// (TestListingWhileANodeStops).
func (n *Node) listen() error {
	done, stop := context.WithCancel(context.Background())
	n.answering.Add(1)
	go func() {
		defer n.answering.Done()
		answer(done, n.questions, n.serveAll)
	}()
	sub, err := n.opts.Conn.Subscribe(rpcList, func(m *nats.Msg) { n.hear(done, n.questions, m) })
	if err != nil {
		stop()
		return fmt.Errorf("cluster: %w", err)
	}
	n.mu.Lock()
	n.listSub, n.stopAnsweringAll = sub, stop
	n.mu.Unlock()
	return nil
}

// stopListening ends what listen started; the goroutine it started ends
// after the question it may be answering.
func (n *Node) stopListening() {
	n.mu.Lock()
	sub, stop := n.listSub, n.stopAnsweringAll
	n.listSub, n.stopAnsweringAll = nil, nil
	n.mu.Unlock()
	if sub != nil {
		sub.Unsubscribe()
	}
	if stop != nil {
		stop()
	}
}

// hear stamps a question as it comes and queues it in qs, unless done
// ends first (the node stopping, or no longer serving the partition
// asked: nothing answers qs any more).
func (n *Node) hear(done context.Context, qs *questionQueue, m *nats.Msg) {
	qs.put(done, question{m: m, heard: n.opts.Clock.Now()})
}

// answer calls serve with each question queued in qs, one at a time, in
// the order they came, until done ends.
func answer(done context.Context, qs *questionQueue, serve func(question)) {
	for {
		q, ok := qs.take(done)
		if !ok {
			return
		}
		serve(q)
	}
}

// skipLate reports whether q's asker has stopped waiting: then it counts
// q (NodeStats.LateQuestions) and warns, rate-limited, saying what q is.
func (n *Node) skipLate(q question, what string, args ...any) bool {
	late, waited := n.late(q)
	if !late {
		return false
	}
	n.lateQuestions.Add(1)
	n.warn(what+" waited past its asker's wait; skipped (this node answers them slower than they come)",
		append(args, "waited", waited, "asker_waits", q.m.Header.Get(withinHeader)+"ms")...)
	return true
}

// late reports whether q's asker has stopped waiting, and how long q waited.
// The header is another process's word: a wait that does not read, or is
// negative, is none (answered, as a question of the release before), and
// one past what a Duration holds is never over.
func (n *Node) late(q question) (bool, time.Duration) {
	waited := n.opts.Clock.Now().Sub(q.heard)
	ms, err := strconv.ParseInt(q.m.Header.Get(withinHeader), 10, 64)
	if err != nil || ms < 0 || ms > int64(math.MaxInt64/time.Millisecond) {
		return false, waited
	}
	return waited > time.Duration(ms)*time.Millisecond, waited
}

// ceilMillis is d in milliseconds, rounded up: a node told the wait
// rounded down could skip a question still waited for.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// serveAll answers a question to every node (a listing, an open ping run)
// for the partitions this node serves, unless its asker has stopped
// waiting.
func (n *Node) serveAll(q question) {
	m := q.m
	var req rpcRequest
	var r rpcReply
	err := json.Unmarshal(m.Data, &req)
	n.mu.Lock()
	parts := make([]*partition, 0, len(n.owned))
	for _, pt := range n.owned {
		parts = append(parts, pt)
	}
	n.mu.Unlock()
	if len(parts) == 0 {
		return // nothing to say; the asker waits for the owners
	}
	if n.skipLate(q, "a question to every node") {
		return
	}
	if n.opts.testServeAllHook != nil {
		n.opts.testServeAllHook()
	}
	if err == nil {
		// What the asker's caller was answered accepted before it asked is
		// decided before the answer, as on one server and as for a task
		// read (serveTask): a run just reported is in a listing (and in a
		// stream client's snapshot) through any node, and a ping's start
		// is found by its end through another node. Bounded for a slow
		// log (caughtup.go).
		catchUpAll(parts, n.opts.QueryTimeout/4)
		switch req.Op {
		case "list":
			err = serveList(&req, parts, &r)
		case "openping":
			for _, pt := range parts {
				if run, ok := pt.bus.OpenPing(req.Tenant, req.Job); ok && (r.Open == nil || run.Newer(*r.Open)) {
					r.Open = &run
				}
				r.Partitions = append(r.Partitions, pt.id)
			}
		default:
			err = fmt.Errorf("unknown operation %q", req.Op)
		}
	}
	n.reply(m, &r, err)
}

// serveList answers a listing for the partitions parts.
func serveList(req *rpcRequest, parts []*partition, r *rpcReply) error {
	lf := req.Filter
	if lf == nil {
		return errors.New("a listing without a filter")
	}
	f := apollo.TaskFilter{Tenant: lf.Tenant, Prefix: lf.Prefix, Status: lf.Status, Since: lf.Since, Until: lf.Until, Limit: lf.Limit, Cursor: lf.Cursor}
	// The asker wants limit+1 tasks of each partition to know whether a
	// next page exists; a bus lists at most maxListPage, and says with
	// its cursor whether it has more. So does this node, of what it
	// leaves out of its partitions' pages: a page of 1 000 from two
	// partitions of 600 each, both whole, would otherwise end the listing
	// 200 tasks early (TestAPageOfAThousandFromANodeOfTwoPartitions).
	f.Limit = min(f.Limit, maxListPage)
	for _, pt := range parts {
		page, next, err := pt.bus.List(f)
		if err != nil {
			return err
		}
		r.More = r.More || next != ""
		r.Tasks = append(r.Tasks, page...)
		r.Partitions = append(r.Partitions, pt.id)
	}
	r.More = r.More || len(r.Tasks) > f.Limit
	r.Tasks = firstPage(r.Tasks, f.Limit)
	return nil
}

// maxListPage is the largest page bus.Bus.List gives, and the largest
// limit of a listing (httpapi refuses more).
const maxListPage = 1000

// firstPage sorts tasks in listing order and keeps the first limit.
func firstPage(tasks []apollo.Task, limit int) []apollo.Task {
	slices.SortFunc(tasks, func(a, b apollo.Task) int { return listOrder(&a, &b) })
	return tasks[:min(len(tasks), limit)]
}

// listOrder compares two tasks in listing order: first reported newest
// first, then by task ID, descending like the bus.
func listOrder(a, b *apollo.Task) int {
	if a.CreatedAt != b.CreatedAt {
		if a.CreatedAt > b.CreatedAt {
			return -1
		}
		return 1
	}
	return strings.Compare(b.TaskID, a.TaskID)
}

// withinHeader, on a question to every node or to a partition's owner, is
// how long its asker waits for the answer, in milliseconds.
const withinHeader = "Apollo-Within"
