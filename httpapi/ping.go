package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bus"
)

// Ping URLs let a cron line that only has curl report a run:
//
//	curl -fsS /ping/backup/start   a run began
//	curl -fsS /ping/backup         it succeeded
//	curl -fsS /ping/backup/fail    it failed
//	curl -fsS /ping/backup/3       it ended with exit code 3 (0 = success)
//
// The server names the runs ("backup@ping-<unix ms>"), numbers their events,
// and pairs an end with the most recent start still running. An end with no
// start is a run reported only by its end: finished, its start unknown
// (docs/protocol.md, "Pings").

// maxPingBody bounds what a POSTed ping body may put into extra.
const maxPingBody = 2 << 10

// openPings remembers the open run of each (tenant, job) pinged with /start.
// It is a cache: after a restart, the bus is asked instead.
type openPings struct {
	mu   sync.Mutex
	runs map[[2]string]openRun
}

type openRun struct {
	taskID string
	seq    int64
}

func (s *Server) ping(w http.ResponseWriter, r *http.Request, p *Principal) error {
	name := r.PathValue("name")
	action := r.PathValue("action")
	if name == "" || len(name) > apollo.MaxNameBytes || strings.ContainsAny(name, "@\x00") {
		return &apollo.Error{Code: apollo.EINVALID, Field: "name", Message: "a job name of 1-256 bytes without @", Hint: "use /ping/<job>[/start|/fail|/<exit code>]"}
	}
	if err := p.mayReport(name); err != nil {
		return err
	}
	status, extra, err := pingOutcome(action)
	if err != nil {
		return err
	}
	if r.Method == http.MethodPost {
		body, err := s.readBody(w, r)
		if err != nil {
			return err
		}
		if len(body) > maxPingBody {
			body = body[:maxPingBody]
		}
		if len(body) > 0 {
			extra["body"] = strings.ToValidUTF8(string(body), "?")
		}
	}
	var timeout int64
	if v := r.URL.Query().Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return &apollo.Error{Code: apollo.EINVALID, Field: "timeout", Message: fmt.Sprintf("%q is not a duration", v), Hint: "e.g. ?timeout=30m"}
		}
		timeout = d.Milliseconds()
	}
	now := s.now().UnixMilli()
	evs := s.pingEvents(p.Tenant, name, status, now, timeout, extra)
	out := make([]bus.Outcome, len(evs))
	if err := s.opts.Bus.Publish(r.Context(), evs, out); err != nil {
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the ping could not be made durable", Hint: "retry"}
	}
	for _, o := range out {
		if o.Result == bus.RetryLater || o.Result == bus.Rejected {
			return o.Err
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "OK %s\n", evs[len(evs)-1].TaskID)
	return nil
}

// pingOutcome turns the last path segment into a status.
func pingOutcome(action string) (apollo.Status, map[string]any, error) {
	extra := map[string]any{"source": "ping"}
	switch action {
	case "":
		return apollo.StatusSuccess, extra, nil
	case "start":
		return apollo.StatusRunning, extra, nil
	case "fail":
		return apollo.StatusFailed, extra, nil
	}
	code, err := strconv.Atoi(action)
	if err != nil || code < 0 || code > 255 {
		return 0, nil, &apollo.Error{Code: apollo.EINVALID, Field: "action", Message: fmt.Sprintf("%q is not start, fail or an exit code 0-255", action)}
	}
	extra["exitCode"] = code
	if code == 0 {
		return apollo.StatusSuccess, extra, nil
	}
	return apollo.StatusFailed, extra, nil
}

// pingEvents builds the events for one ping and updates the open runs.
func (s *Server) pingEvents(tenant, name string, st apollo.Status, now, timeout int64, extra map[string]any) []apollo.Event {
	raw, _ := json.Marshal(extra)
	k := [2]string{tenant, name}
	s.pings.mu.Lock()
	defer s.pings.mu.Unlock()
	if s.pings.runs == nil {
		s.pings.runs = map[[2]string]openRun{}
	}
	if st == apollo.StatusRunning {
		id := fmt.Sprintf("%s@ping-%d", name, now)
		if len(s.pings.runs) < 100_000 {
			s.pings.runs[k] = openRun{taskID: id, seq: 1}
		}
		return []apollo.Event{{TaskID: id, Name: name, Tenant: tenant, Sequence: 1, Status: st, Ts: now, TimeoutMs: timeout, Extra: raw}}
	}
	run, ok := s.pings.runs[k]
	if !ok {
		run, ok = s.findOpenPing(tenant, name)
	}
	delete(s.pings.runs, k)
	if ok {
		return []apollo.Event{{TaskID: run.taskID, Name: name, Tenant: tenant, Sequence: run.seq + 1, Status: st, Ts: now, Extra: raw}}
	}
	id := fmt.Sprintf("%s@ping-%d", name, now)
	return []apollo.Event{{TaskID: id, Name: name, Tenant: tenant, Sequence: 1, Status: st, Ts: now, Extra: raw}}
}

// findOpenPing asks the bus for the newest running ping run of a job: the
// cache is empty after a restart.
func (s *Server) findOpenPing(tenant, name string) (openRun, bool) {
	tasks, _, err := s.opts.Bus.List(apollo.TaskFilter{Tenant: tenant, Prefix: name + "@ping-", Status: apollo.StatusRunning, Limit: 1})
	if err != nil || len(tasks) == 0 || tasks[0].Name != name {
		return openRun{}, false
	}
	return openRun{taskID: tasks[0].TaskID, seq: tasks[0].Sequence}, true
}
