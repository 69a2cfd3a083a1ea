package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apollo-11/apollo"
)

// Ping URLs let a cron line that only has curl report a run:
//
//	curl -fsS /ping/backup/start   a run began
//	curl -fsS /ping/backup         it succeeded
//	curl -fsS /ping/backup/fail    it failed
//	curl -fsS /ping/backup/3       it ended with exit code 3 (0 = success)
//
// This file reads the URL; naming the runs, numbering their events and
// pairing an end with its start are the domain's rules (apollo.Ping) and
// the bus's state (Bus.Ping), in every mode (docs/protocol.md, "Pings").

// maxPingBody bounds what a POSTed ping body may put into extra.
const maxPingBody = 2 << 10

// hintPingOutput is the hint for a ping body over the server's limit.
var hintPingOutput = fmt.Sprintf("send only the end of the job's output (a ping keeps at most its first %d bytes)", maxPingBody)

func (s *Server) ping(w http.ResponseWriter, r *http.Request, p *Principal) error {
	name := r.PathValue("name")
	action := r.PathValue("action")
	if err := checkPingName(name); err != nil {
		return err
	}
	if err := p.mayReport(name); err != nil {
		return err
	}
	status, extra, err := pingOutcome(action)
	if err != nil {
		return err
	}
	d, err := duration(r, "timeout", 0)
	if err != nil {
		return err
	}
	if d > apollo.MaxDurationMs*time.Millisecond {
		return &apollo.Error{Code: apollo.EINVALID, Field: "timeout", Message: quoteInput(r.URL.Query().Get("timeout")) + " is over the limit of 366 days",
			Hint: "give the run's deadline, e.g. 30m or 2h"}
	}
	timeout := (d + time.Millisecond - 1).Milliseconds() // under a millisecond is one, not none
	// A ping is an event: it counts against the token's rate as one sent
	// to POST /api/v1/events, before its body is read.
	if wait, err := s.allowIngest(p, 1); err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())))
		return err
	}
	if r.Method == http.MethodPost {
		body, err := s.readBody(w, r, hintPingOutput)
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
	raw, _ := json.Marshal(extra)
	ev, o, err := s.opts.Bus.Ping(r.Context(), apollo.Ping{Tenant: p.Tenant, Job: name, Status: status,
		Ts: s.now().UnixMilli(), TimeoutMs: timeout, Extra: raw})
	if err != nil {
		return &apollo.Error{Code: apollo.EUNAVAILABLE, Message: "the ping could not be made durable", Hint: "retry"}
	}
	if o.Result == apollo.ResultRetryLater || o.Result == apollo.ResultRejected {
		return o.Err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "OK %s\n", ev.TaskID)
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
		return 0, nil, &apollo.Error{Code: apollo.EINVALID, Field: "action", Message: quoteInput(action) + " is not start, fail or an exit code 0-255"}
	}
	extra["exitCode"] = code
	if code == 0 {
		return apollo.StatusSuccess, extra, nil
	}
	return apollo.StatusFailed, extra, nil
}

// maxPingName is the longest job name a ping takes: the server names its
// runs job@ping-<Unix ms> (apollo.PingRunID), and the bus refused a longer
// name's run as a task ID over its limit, which the caller never sent.
// Unix ms have 13 digits until the year 2286.
var maxPingName = apollo.MaxTaskIDBytes - len(apollo.PingRunID("", 1e12))

// checkPingName says what is wrong with a ping's job name, if anything.
func checkPingName(name string) error {
	const hint = "use /ping/<job>[/start|/fail|/<exit code>]"
	bad := func(msg string) error {
		return &apollo.Error{Code: apollo.EINVALID, Field: "name", Message: msg, Hint: hint}
	}
	switch {
	case name == "":
		return bad("missing")
	case len(name) > apollo.MaxNameBytes:
		return bad(fmt.Sprintf("%d bytes, over the limit of %d", len(name), apollo.MaxNameBytes))
	case len(name) > maxPingName:
		return bad(fmt.Sprintf("%d bytes: a ping's job name has at most %d, so that its runs' IDs (job@ping-<Unix ms>) fit the %d bytes of a task ID",
			len(name), maxPingName, apollo.MaxTaskIDBytes))
	case !utf8.ValidString(name):
		return bad("not valid UTF-8")
	case strings.Contains(name, "@"):
		return bad("a ping's job name cannot hold @: the server names the job's runs job@...")
	case strings.Contains(name, "\x00"):
		return bad("a NUL byte (%00) in the name")
	}
	return nil
}

// checkPingPath refuses a ping URL with an empty or dot segment, such as
// the /ping//0 of a cron line whose job variable was empty. The router
// would answer it with a redirect to a cleaned path (/ping/0): curl
// without -L records nothing and exits 0, a client that follows records
// a run of the wrong job. A 400 says what is wrong instead.
func checkPingPath(r *http.Request) error {
	if !strings.HasPrefix(r.URL.Path, "/ping/") { // every other request: no escaping work
		return nil
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/ping/")
	if !ok {
		return nil
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return &apollo.Error{Code: apollo.EINVALID, Field: "name",
				Message: "the ping URL " + quoteInput(r.URL.EscapedPath()) + " has an empty or dot segment: is the job name missing?",
				Hint:    "use /ping/<job>[/start|/fail|/<exit code>], with the job's name filled in"}
		}
	}
	return nil
}
