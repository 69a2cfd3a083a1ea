package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// Issue 16.5: a token limited to one job prefix could change or take over
// any job's runs. FuzzPrefixTokenKeepsToItsJobs lets such a token (agent,
// job prefix "backup", tenant a) send whatever the fuzzer makes up, through
// the real handler: events in batches (JSON or NDJSON) for task IDs from a
// small set that other jobs use, with names inside and outside its prefix,
// sequences up to and past 2^53 and the int64 extremes, every status and
// some that are none; pings; attempts at a correction. Then:
//
//   - no task of tenant a whose job is outside the prefix has changed, in
//     state or history, and no such task has appeared; no task changed job;
//   - the reporter of those jobs can still report its runs (running, then
//     failed), and each is recorded; a task ID the token claimed first for
//     a job of its own is refused to that reporter with a conflict on
//     "name", never answered "duplicate";
//   - tenant b, which has runs with the same task IDs and job names, is
//     untouched, and its reporter's next event is recorded.

// The attacker's choices: each op picks one of these or, past the end of a
// list, the fuzzer's own value.
var (
	attackIDs = []string{"payroll-0", "payroll-1", "payroll-2", "payroll-3", "nightly-1", "backup-1", "backup-2",
		"backup_db", "payroll", "backup", "Payroll-1"}
	attackNames = []string{"", "backup", "backup_x", "backup_db", "backupx", "Backup_x", "back", "payroll",
		"nightly-1", "payroll-1", "payroll-3", " backup"}
	attackSeqs = []int64{0, 1, 2, 3, 4, 5, bus.MaxSequenceJump, bus.MaxSequenceJump + 1, bus.MaxSequenceJump + 2,
		apollo.MaxSequence - 1, apollo.MaxSequence, apollo.MaxSequence + 1, math.MaxInt64, math.MinInt64, -1}
	attackStatuses = []string{"pending", "running", "success", "failed", "timeout", "manual_blocked", "done", ""}
)

// attackOp is one step of the attacker, four bytes of the fuzz input:
// indexes into the lists above (one past the end is the fuzzer's own
// value), then the status (low 3 bits) and flags.
type attackOp struct{ id, name, seq, flags byte }

// The flags byte: bits 0-2 the status; bits 3-4 the kind of step.
const (
	opEvent   = 0 << 3 // an event, added to the request being built
	opSend    = 1 << 3 // an event, and the request is sent
	opPing    = 2 << 3 // GET /ping/NAME/ACTION
	opCorrect = 3 << 3 // POST /api/v1/tasks/ID/status
	opNDJSON  = 1 << 5 // the request is NDJSON (read from its first event)
	opOldTs   = 1 << 6 // ts an hour before now
	opTenant  = 1 << 7 // the event says "tenant":"b"
)

func encodeAttack(ops ...attackOp) []byte {
	var b []byte
	for _, o := range ops {
		b = append(b, o.id, o.name, o.seq, o.flags)
	}
	return b
}

// indexOf is the index of v in list, for readable seeds.
func indexOf[T comparable](list []T, v T) byte {
	for i, x := range list {
		if x == v {
			return byte(i)
		}
	}
	panic(fmt.Sprintf("%v is not in the list", v))
}

func statusBits(s string) byte { return indexOf(attackStatuses, s) }

// ownerWorld is a server with three agent tokens: the reporter of tenant
// a's jobs, the token limited to "backup" in tenant a, and the reporter of
// tenant b.
type ownerWorld struct {
	bus    *bus.Bus
	srv    *Server
	tokens map[string]string
	now    int64
}

func (w *ownerWorld) do(t *testing.T, method, path, token, ctype, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+w.tokens[token])
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	w.srv.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("%s %s as %s: %d %s", method, path, token, rec.Code, rec.Body)
	}
	return rec.Code, rec.Body.String()
}

// report sends one event as token and returns its answer.
func (w *ownerWorld) report(t *testing.T, token, id, name string, seq int64, status string) eventResult {
	t.Helper()
	ev := map[string]any{"taskID": id, "sequence": seq, "status": status, "ts": w.now}
	if name != "" {
		ev["name"] = name
	}
	body, _ := json.Marshal(ev)
	code, out := w.do(t, "POST", "/api/v1/events", token, "application/json", string(body))
	var ans struct{ Results []eventResult }
	if err := json.Unmarshal([]byte(out), &ans); code != 200 || err != nil || len(ans.Results) != 1 {
		t.Fatalf("%s reporting %s: %d %s", token, body, code, out)
	}
	return ans.Results[0]
}

// tasks is every task of tenant in memory, with its history.
func (w *ownerWorld) tasks(t *testing.T, tenant string) map[string]apollo.Task {
	t.Helper()
	list, next, err := w.bus.List(apollo.TaskFilter{Tenant: tenant, Limit: 1000})
	if err != nil || next != "" {
		t.Fatalf("listing tenant %s: %v (more after %q)", tenant, err, next)
	}
	out := map[string]apollo.Task{}
	for _, tk := range list {
		full, err := w.bus.Get(tenant, tk.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		out[tk.TaskID] = *full
	}
	return out
}

// attack runs the attacker's program as the "backup" token.
func (w *ownerWorld) attack(t *testing.T, prog []byte, id, name string, seq int64) {
	t.Helper()
	pick := func(list []string, i byte, own string) string {
		if int(i)%(len(list)+1) == len(list) {
			return own
		}
		return list[int(i)%(len(list)+1)]
	}
	var batch []string
	ndjson := false
	send := func() {
		if len(batch) == 0 {
			return
		}
		body, ctype := "["+strings.Join(batch, ",")+"]", "application/json"
		if ndjson {
			body, ctype = strings.Join(batch, "\n"), "application/x-ndjson"
		}
		w.do(t, "POST", "/api/v1/events", "backup", ctype, body)
		batch = batch[:0]
	}
	for len(prog) >= 4 && len(prog) <= 4*48 {
		o := attackOp{prog[0], prog[1], prog[2], prog[3]}
		prog = prog[4:]
		opID, opName := pick(attackIDs, o.id, id), pick(attackNames, o.name, name)
		opSeq := seq
		if i := int(o.seq) % (len(attackSeqs) + 1); i < len(attackSeqs) {
			opSeq = attackSeqs[i]
		}
		status := attackStatuses[o.flags&7]
		switch o.flags & (3 << 3) {
		case opPing:
			action := map[string]string{"running": "/start", "failed": "/fail", "success": "", "timeout": "/124"}[status]
			w.do(t, "GET", "/ping/"+url.PathEscape(opName)+action, "backup", "", "")
			continue
		case opCorrect:
			w.do(t, "POST", "/api/v1/tasks/"+url.PathEscape(opID)+"/status", "backup", "application/json",
				fmt.Sprintf(`{"status":%q,"reason":"fuzz"}`, status))
			continue
		}
		if len(batch) == 0 {
			ndjson = o.flags&opNDJSON != 0
		}
		ts := w.now
		if o.flags&opOldTs != 0 {
			ts -= time.Hour.Milliseconds()
		}
		ev := map[string]any{"taskID": opID, "sequence": opSeq, "ts": ts}
		if status != "" {
			ev["status"] = status
		}
		if opName != "" {
			ev["name"] = opName
		}
		if o.flags&opTenant != 0 {
			ev["tenant"] = "b"
		}
		b, _ := json.Marshal(ev)
		batch = append(batch, string(b))
		if o.flags&(3<<3) == opSend {
			send()
		}
	}
	send()
}

func FuzzPrefixTokenKeepsToItsJobs(f *testing.F) {
	// The two attacks: ending another job's run by naming a job of
	// its own, or none; claiming a task ID another job will use, with the
	// last sequence there is.
	f.Add(encodeAttack(
		attackOp{indexOf(attackIDs, "payroll-1"), indexOf(attackNames, "backup_x"), indexOf(attackSeqs, 2), statusBits("success") | opSend},
		attackOp{indexOf(attackIDs, "payroll-1"), indexOf(attackNames, ""), indexOf(attackSeqs, 2), statusBits("success") | opSend},
	), "", "", int64(0))
	f.Add(encodeAttack(
		attackOp{indexOf(attackIDs, "payroll-3"), indexOf(attackNames, "backup_x"), indexOf(attackSeqs, apollo.MaxSequence), statusBits("manual_blocked") | opSend},
	), "", "", int64(0))
	// Batches, NDJSON, a tenant field, pings and a correction, and the
	// fuzzer's own ID, name and sequence.
	f.Add(encodeAttack(
		attackOp{indexOf(attackIDs, "nightly-1"), indexOf(attackNames, "backup"), indexOf(attackSeqs, 3), statusBits("failed") | opNDJSON | opTenant},
		attackOp{indexOf(attackIDs, "backup-1"), indexOf(attackNames, ""), indexOf(attackSeqs, bus.MaxSequenceJump+1), statusBits("success")},
		attackOp{indexOf(attackIDs, "payroll-2"), byte(len(attackNames)), byte(len(attackSeqs)), statusBits("running") | opSend},
		attackOp{0, indexOf(attackNames, "backup_x"), 0, statusBits("running") | opPing},
		attackOp{indexOf(attackIDs, "payroll-0"), 0, 0, statusBits("pending") | opCorrect},
		attackOp{byte(len(attackIDs)), indexOf(attackNames, "backup_x"), indexOf(attackSeqs, math.MinInt64), statusBits("done") | opOldTs | opSend},
	), "payroll-2", "backup_payroll", int64(math.MaxInt64))

	tokens := map[string]string{}
	var toks []Token
	for _, tk := range []struct{ name, tenant, prefix string }{{"payroll", "a", ""}, {"backup", "a", "backup"}, {"b", "b", ""}} {
		secret, tok, err := NewToken(tk.name, RoleAgent, tk.tenant)
		if err != nil {
			f.Fatal(err)
		}
		tok.JobPrefix = tk.prefix
		tokens[tk.name], toks = secret, append(toks, tok)
	}
	auth := NewTokenAuth(toks)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

	f.Fuzz(func(t *testing.T, prog []byte, id, name string, seq int64) {
		clock := apollo.NewFakeClock(now)
		b, err := bus.New(bus.Options{Clock: clock, Workers: 1, Logger: discardLogger})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer b.Stop(context.Background())
		w := &ownerWorld{bus: b, srv: New(Options{Bus: b, Auth: auth, Clock: clock, Logger: discardLogger}), tokens: tokens, now: now.UnixMilli()}

		// Before: tenant a's runs of other jobs (one finished, one without
		// a name, whose job is its task ID), a run of the token's own job,
		// and tenant b's runs under the same IDs and names.
		for _, e := range []struct {
			token, id, name string
			seq             int64
			status          string
		}{
			{"payroll", "payroll-0", "payroll", 1, "running"}, {"payroll", "payroll-0", "payroll", 2, "success"},
			{"payroll", "payroll-1", "payroll", 1, "running"}, {"payroll", "payroll-2", "payroll", 1, "pending"},
			{"payroll", "nightly-1", "", 1, "running"}, {"backup", "backup-1", "backup_db", 1, "running"},
			{"b", "payroll-1", "payroll", 1, "running"}, {"b", "backup-1", "backup_db", 1, "running"},
			{"b", "payroll-3", "payroll", 1, "running"},
		} {
			if r := w.report(t, e.token, e.id, e.name, e.seq, e.status); r.Result != "accepted" {
				t.Fatalf("setting up %+v: %s %v", e, r.Result, r.Error)
			}
		}
		beforeA, beforeB := w.tasks(t, "a"), w.tasks(t, "b")

		w.attack(t, prog, id, name, seq)

		// (a) Tenant a: other jobs' tasks unchanged, none new, no task
		// changed job.
		ours := func(job string) bool { return strings.HasPrefix(job, "backup") }
		afterA := w.tasks(t, "a")
		for tid, was := range beforeA {
			got, ok := afterA[tid]
			switch {
			case !ok:
				t.Fatalf("task %q of job %q is gone", tid, was.Name)
			case got.Name != was.Name:
				t.Fatalf("task %q moved from job %q to %q", tid, was.Name, got.Name)
			case !ours(was.Name) && !reflect.DeepEqual(got, was):
				t.Fatalf("task %q of job %q changed:\nbefore %+v\nafter  %+v", tid, was.Name, was, got)
			}
		}
		for tid, tk := range afterA {
			if _, ok := beforeA[tid]; !ok && !ours(tk.Name) {
				t.Fatalf("a task %q of job %q appeared", tid, tk.Name)
			}
		}
		// (c) Tenant b: untouched.
		if afterB := w.tasks(t, "b"); !reflect.DeepEqual(afterB, beforeB) {
			t.Fatalf("tenant b changed:\nbefore %+v\nafter  %+v", beforeB, afterB)
		}

		// (b) The reporters carry on with their runs.
		claimed := afterA["payroll-3"].Name // "" unless the token took the ID
		for _, e := range []struct {
			token, id, name string
			seq             int64
			status          string
		}{
			{"payroll", "payroll-1", "payroll", 2, "failed"},
			{"payroll", "payroll-2", "payroll", 2, "running"}, {"payroll", "payroll-2", "payroll", 3, "failed"},
			{"payroll", "nightly-1", "", 2, "failed"},
			{"payroll", "payroll-3", "payroll", 1, "running"}, {"payroll", "payroll-3", "payroll", 2, "failed"},
			{"b", "payroll-1", "payroll", 2, "failed"},
		} {
			r := w.report(t, e.token, e.id, e.name, e.seq, e.status)
			if e.id == "payroll-3" && claimed != "" {
				if r.Result != "rejected" || r.Error == nil || r.Error.Code != apollo.ECONFLICT || r.Error.Field != "name" ||
					!strings.Contains(r.Error.Message, strconv.Quote(claimed)) {
					t.Fatalf("the reporter's %s of %s, which job %q claimed: %s %+v; want a conflict that names that job", e.status, e.id, claimed, r.Result, r.Error)
				}
				continue
			}
			if r.Result != "accepted" {
				t.Fatalf("the reporter's %s of %s in tenant %s: %s %+v", e.status, e.id, e.token, r.Result, r.Error)
			}
			tenant := map[string]string{"payroll": "a", "b": "b"}[e.token]
			got, err := b.Get(tenant, e.id)
			if err != nil || got.Status.String() != e.status || got.Sequence != e.seq || len(got.History) == 0 ||
				got.History[len(got.History)-1].Sequence != e.seq {
				t.Fatalf("the reporter's %s of %s is not recorded: %+v %v", e.status, e.id, got, err)
			}
		}
	})
}
