package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/bench/internal/harness"
	"github.com/apollo-11/apollo/httpapi"
)

// Hostile bodies (issue 16.4): one POST /api/v1/events of 4 MiB once took
// more than a gigabyte of RSS, whatever the body held. Each body below is
// sent alone, then four copies at once, to a fresh server, and the growth
// of the server's peak RSS (VmHWM, reset just before the requests: a
// spike of 50 ms counts) must stay within bigBodyFactor × each body plus
// bigBodyFixed per request. Every request must get its documented answer,
// and the server must accept a normal event afterwards.
const (
	bigBodyAtOnce = 4
	// The bound on what one request may add to the server's peak RSS.
	// Decoding stops at the request's limit (at most 10 000 elements), so
	// a request holds its body, at most the limit's worth of decoded
	// elements and its answer: httpapi.TestIngestMemoryPerRequest counts
	// 8.3 MB allocated for the 4 MiB bodies and 4.6 MB for a 480 KB body
	// of junk that reaches the 10 000. On a fresh server RSS grows by up
	// to about twice what a request allocates (the heap grows to hold it
	// and nothing is collected below the first heap goal, ~10 MB): hence
	// 3× the body, and 12 MiB for the decoded elements and that growth.
	bigBodyFactor = 3
	bigBodyFixed  = 12 << 20
	// bigBodyMax is the server's body limit (limits.body_bytes' default).
	bigBodyMax = 4 << 20
	// slowRate is the rate of the token whose 4 MiB of events is over its
	// rate per request before it is over the 10 000 events of a request:
	// 413 too (a request over a token's second's worth could never pass,
	// so it is not 429; docs/protocol.md).
	slowRate = 5000
)

// hostile is one body and the answer it must get.
type hostile struct {
	name, ctype string
	body        []byte
	token       string // "agent" or "slow"
	status      int
	code        string
}

// hostileBodies are the bodies, its valid-looking variant, and the
// small body of junk with the largest multiple of its size.
func hostileBodies() []hostile {
	ones := func(size int) []byte { // [1,1,...,1] of size bytes (size odd)
		b := make([]byte, 0, size)
		b = append(b, '[')
		for len(b) < size-2 {
			b = append(b, '1', ',')
		}
		return append(b, '1', ']')
	}
	events := []byte{'['}
	ts := time.Now().UnixMilli()
	for i := int64(0); ; i++ {
		n := len(events)
		if i > 0 {
			events = append(events, ',')
		}
		events = harness.AppendEvent(events, "bigbody-", i, 100, 1, "running", ts)
		if len(events)+1 > bigBodyMax-1 {
			events = append(events[:n], ']')
			break
		}
	}
	nEvents := bytes.Count(events, []byte(`"taskID"`))
	return []hostile{
		{fmt.Sprintf("`[1,1,1,…]`, %d elements", (bigBodyMax-1)/2), "application/json", ones(bigBodyMax - 1), "agent", 413, apollo.ETOOLARGE},
		{fmt.Sprintf("NDJSON `{}` × %d", bigBodyMax/3), "application/x-ndjson", bytes.Repeat([]byte("{}\n"), bigBodyMax/3), "agent", 413, apollo.ETOOLARGE},
		{fmt.Sprintf("%d valid events (over 10 000)", nEvents), "application/json", events, "agent", 413, apollo.ETOOLARGE},
		{fmt.Sprintf("the same, token rate %d/s", slowRate), "application/json", events, "slow", 413, apollo.ETOOLARGE},
		{"`[1,1,1,…]` of 480 KB", "application/json", ones(479_999), "agent", 400, apollo.EINVALID},
		{"control: one valid event", "application/json", fmt.Appendf(nil, `{"taskID":"bigbody-control","sequence":1,"status":"running","ts":%d}`, ts), "agent", 200, ""},
	}
}

// bigBodyServer is a fresh server with an agent token, an agent token
// limited to slowRate, and an admin token to read back with.
type bigBodyServer struct {
	*harness.Proc
	tokens map[string]string
}

func startBigBodyServer(bin string) (*bigBodyServer, error) {
	tokens := map[string]string{}
	cfg := "auth:\n  tokens:\n"
	for _, tk := range []struct {
		name string
		role httpapi.Role
		rate int
	}{{"agent", httpapi.RoleAgent, 0}, {"slow", httpapi.RoleAgent, slowRate}, {"admin", httpapi.RoleAdmin, 0}} {
		secret, tok, err := httpapi.NewToken(tk.name, tk.role, "")
		if err != nil {
			return nil, err
		}
		tokens[tk.name] = secret
		cfg += fmt.Sprintf("    - {name: %s, role: %s, sha256: %x, rate: %d}\n", tk.name, tk.role, tok.Hash, tk.rate)
	}
	srv, err := harness.Start(bin, harness.Options{Args: []string{"server"}, Config: cfg})
	if err != nil {
		return nil, err
	}
	return &bigBodyServer{Proc: srv, tokens: tokens}, nil
}

// answer is what a request got: its status, the error code of its body,
// and its Retry-After.
type answer struct {
	status     int
	code, wait string
}

func (a answer) String() string {
	if a.status == 0 {
		return a.code // no answer: why
	}
	return strings.TrimSpace(fmt.Sprintf("%d %s", a.status, a.code))
}

func (s *bigBodyServer) post(token, ctype string, body []byte) (answer, []byte, error) {
	req, err := http.NewRequest("POST", s.URL()+"/api/v1/events", bytes.NewReader(body))
	if err != nil {
		return answer{}, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.tokens[token])
	req.Header.Set("Content-Type", ctype)
	// The timeout leaves room for the code before issue 16.4, which took
	// minutes over four of these bodies at once on 2 busy cores.
	resp, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		return answer{}, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	var eb struct{ Error *apollo.Error }
	a := answer{status: resp.StatusCode, wait: resp.Header.Get("Retry-After")}
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		a.code = eb.Error.Code
	}
	return a, b, err
}

// acceptsEvent reports a run with the agent token and reads it back.
func (s *bigBodyServer) acceptsEvent(id string) error {
	ev := fmt.Sprintf(`{"taskID":%q,"name":"bigbody_after","sequence":1,"status":"running","ts":%d}`, id, time.Now().UnixMilli())
	a, b, err := s.post("agent", "application/json", []byte(ev))
	if err != nil || a.status != 200 || !bytes.Contains(b, []byte(`"result":"accepted"`)) {
		return fail("a normal event after the bodies: %d %s %v", a.status, b, err)
	}
	req, _ := http.NewRequest("GET", s.URL()+"/api/v1/tasks/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+s.tokens["admin"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var task apollo.Task
	if err := json.NewDecoder(resp.Body).Decode(&task); err != nil || resp.StatusCode != 200 || task.Status != apollo.StatusRunning {
		return fail("reading back %s after the bodies: %d %+v %v", id, resp.StatusCode, task, err)
	}
	return nil
}

// bigBodyFigure is one measurement: n copies of a body at once on a fresh
// server.
type bigBodyFigure struct {
	before, peak int64 // RSS before the requests, peak RSS during them
	answers      []answer
	after        error // from the normal event sent afterwards
}

func (f bigBodyFigure) growth() int64 { return max(f.peak-f.before, 0) }

// measureBodies sends n copies of h at once to a fresh server and returns
// the server's RSS before and its peak during the requests; then the
// server must accept a normal event.
func measureBodies(bin string, h hostile, n int) (bigBodyFigure, error) {
	var f bigBodyFigure
	srv, err := startBigBodyServer(bin)
	if err != nil {
		return f, err
	}
	defer func() { srv.Kill(); srv.Remove() }()
	// A first request sets up what every later one shares (the token's
	// rate bucket, the log's first segment, pools): not the body's cost.
	if err := srv.acceptsEvent("bigbody-warm-up"); err != nil {
		return f, err
	}
	// Without the reset (a kernel before 4.0, a /proc that refuses the
	// write), VmHWM is the peak since the server started: still an upper
	// bound of the requests' peak, on a server this fresh.
	if err := harness.ResetPeak(srv.PID()); err != nil && noReset == nil {
		noReset = err
	}
	u, err := harness.Sample(srv.PID())
	if err != nil {
		return f, err
	}
	f.before = u.RSS
	f.answers = make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			if f.answers[i], _, err = srv.post(h.token, h.ctype, h.body); err != nil {
				f.answers[i] = answer{code: "no answer: " + err.Error()}
			}
		})
	}
	wg.Wait()
	if u, err = harness.Sample(srv.PID()); err != nil {
		return f, fail("%s, %d at once: the server is gone: %v", h.name, n, err)
	}
	f.peak = u.Peak
	f.after = srv.acceptsEvent(fmt.Sprintf("bigbody-after-%d", n))
	return f, nil
}

// noReset is why the peak RSS could not be reset, if it could not.
var noReset error

// bigBodies runs the case: every body alone, then bigBodyAtOnce at once,
// each on a fresh server, rounds times; every answer is checked, and the
// worst round's growth is reported and judged.
func bigBodies(bin string, rounds int) error {
	bodies := hostileBodies()
	type row struct {
		alone, atOnce bigBodyFigure
		answers       map[answer]int
	}
	rows := make([]row, len(bodies))
	// problems counts each distinct one, in the order first seen.
	var problems []string
	seen := map[string]int{}
	problem := func(format string, a ...any) {
		p := fmt.Sprintf(format, a...)
		if seen[p]++; seen[p] == 1 {
			problems = append(problems, p)
		}
	}
	want := func(h hostile) answer { return answer{status: h.status, code: h.code} }
	judge := func(h hostile, worst *bigBodyFigure, f bigBodyFigure, answers map[answer]int) {
		for _, a := range f.answers {
			answers[answer{status: a.status, code: a.code}]++
			switch {
			case a.status != h.status || a.code != h.code:
				problem("%s answered %s, want %s", h.name, a, want(h))
			case h.status == 429 && a.wait == "":
				problem("%s answered 429 without Retry-After", h.name)
			}
		}
		if f.after != nil {
			problem("after %s: %v", h.name, f.after)
		}
		n := int64(len(f.answers))
		if bound := n * bigBodyBound(h); f.growth() > bound {
			problem("%s, %d at once: RSS +%s, over %s", h.name, n, harness.MiB(f.growth()), harness.MiB(bound))
		}
		if worst.answers == nil || f.growth() > worst.growth() {
			*worst = f
		}
	}
	for r := range rounds {
		for i, h := range bodies {
			alone, err := measureBodies(bin, h, 1)
			if err != nil {
				return err
			}
			atOnce, err := measureBodies(bin, h, bigBodyAtOnce)
			if err != nil {
				return err
			}
			if rows[i].answers == nil {
				rows[i].answers = map[answer]int{}
			}
			judge(h, &rows[i].alone, alone, rows[i].answers)
			judge(h, &rows[i].atOnce, atOnce, rows[i].answers)
			fmt.Fprintf(os.Stderr, "bigbody round %d: %s: alone +%s, %d at once +%s\n", r+1, h.name, harness.MiB(alone.growth()), bigBodyAtOnce, harness.MiB(atOnce.growth()))
		}
	}

	fmt.Println()
	fmt.Println("### Hostile request bodies")
	fmt.Println()
	fmt.Printf("Each body is posted to `POST /api/v1/events` of a fresh server (an agent token with the default rate, another limited to %d events/s), "+
		"after one normal event: alone, then %d copies at once, %d round(s) of each, the worst round shown. The server's peak RSS (`VmHWM`, reset through "+
		"`/proc/PID/clear_refs` just before the requests, so no spike falls between samples) is compared with its RSS before them. "+
		"Bound: at most %d× the body + %d MiB per request (decoding stops at the request's limit, at most 10 000 elements, so a request holds its body, "+
		"at most the limit's worth of decoded elements and its answer; on a fresh server RSS grows by up to about twice what a request allocates). "+
		"Every answer must be the documented one (docs/protocol.md), and afterwards the server must accept a normal event and read it back.\n\n",
		slowRate, bigBodyAtOnce, rounds, bigBodyFactor, bigBodyFixed>>20)
	if noReset != nil {
		fmt.Printf("The peak RSS could not be reset (%v): the peaks below are those since each server's start, an upper bound of the requests' peak.\n\n", noReset)
	}
	fmt.Printf("| body | bytes | answers | alone: RSS before → peak (growth, × body) | %d at once: growth (× the bodies) | bound alone / at once |\n", bigBodyAtOnce)
	fmt.Println("|---|---|---|---|---|---|")
	var worstAlone, worstAtOnce float64
	for i, h := range bodies {
		rw := rows[i]
		size := int64(len(h.body))
		var got []string
		for a, n := range rw.answers {
			got = append(got, fmt.Sprintf("%d × %s", n, a))
		}
		sort.Strings(got)
		fmt.Printf("| %s | %d | %s | %s → %s (+%s, %s) | +%s (%s) | %s / %s |\n", h.name, size, strings.Join(got, ", "),
			harness.MiB(rw.alone.before), harness.MiB(rw.alone.peak), harness.MiB(rw.alone.growth()), times(rw.alone.growth(), size),
			harness.MiB(rw.atOnce.growth()), times(rw.atOnce.growth(), bigBodyAtOnce*size),
			harness.MiB(bigBodyBound(h)), harness.MiB(bigBodyAtOnce*bigBodyBound(h)))
		if size >= bigBodyMax/2 {
			worstAlone = max(worstAlone, float64(rw.alone.growth())/float64(size))
			worstAtOnce = max(worstAtOnce, float64(rw.atOnce.growth())/float64(bigBodyAtOnce*size))
		}
	}
	fmt.Println()
	fmt.Printf("Target: one request's memory is bounded by its body; every body gets its documented answer; the server accepts a normal event afterwards — ")
	if len(problems) > 0 {
		for i, p := range problems {
			if n := seen[p]; n > 1 {
				problems[i] = fmt.Sprintf("%s (%d times)", p, n)
			}
		}
		fmt.Printf("MISSED (%s)\n", strings.Join(problems, "; "))
		return fail("%d problem(s), listed above", len(problems))
	}
	fmt.Printf("met (the 4 MiB bodies: at most %.1f× the body alone, %.1f× the bodies %d at once)\n", worstAlone, worstAtOnce, bigBodyAtOnce)
	return nil
}

// bigBodyBound is what one request with h's body may add to the peak RSS.
func bigBodyBound(h hostile) int64 { return bigBodyFactor*int64(len(h.body)) + bigBodyFixed }

// times is growth as a multiple of size; "–" for a body too small for the
// ratio to mean anything.
func times(growth, size int64) string {
	if size < 64<<10 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", float64(growth)/float64(size))
}
