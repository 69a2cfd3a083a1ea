package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// apolloServer is the real binary, `apollo server`, in a process of its
// own: what a restart means is a process killed and started again.
type apolloServer struct {
	t      *testing.T
	bin    string
	args   []string
	cmd    *exec.Cmd
	addr   string
	out    *strings.Builder
	exited chan struct{}
}

// buildApollo builds cmd/apollo into a temporary folder.
func buildApollo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "apollo")
	build := exec.Command("go", "build", "-o", bin, "github.com/apollo-11/apollo/cmd/apollo")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building apollo: %v\n%s", err, out)
	}
	return bin
}

// startServer runs `apollo server` with args and --listen listen, and
// waits for its "is up" line.
func startServer(t *testing.T, bin, listen string, args ...string) *apolloServer {
	t.Helper()
	s := &apolloServer{t: t, bin: bin, args: args, out: &strings.Builder{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append(append([]string{"server"}, args...), "--listen", listen)...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s.cmd.Stderr = s.out
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	up := apiclient.WatchReady(stdout, apiclient.ReadyPrefix)
	go func() { s.cmd.Wait(); close(s.exited) }()
	select {
	case s.addr = <-up:
	case <-s.exited:
		t.Fatalf("apollo server exited before serving:\n%s", s.out)
	case <-time.After(testwait.Timeout(t)):
		s.kill()
		t.Fatalf("apollo server not up:\n%s", s.out)
	}
	t.Cleanup(s.kill)
	return s
}

// kill sends SIGKILL to the process group and waits for the process.
func (s *apolloServer) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}

// restart kills the server with SIGKILL and starts it again on the same
// data and address.
func (s *apolloServer) restart() *apolloServer {
	s.t.Helper()
	s.kill()
	return startServer(s.t, s.bin, s.addr, s.args...)
}

// call sends a request with a token and decodes the JSON answer into v
// (nil: dropped); it wants 2xx.
func (s *apolloServer) call(method, path, token, body string, v any) {
	s.t.Helper()
	req, err := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	ans, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode/100 != 2 {
		s.t.Fatalf("%s %s: HTTP %d %s %v", method, path, resp.StatusCode, ans, err)
	}
	if v != nil {
		if err := json.Unmarshal(ans, v); err != nil {
			s.t.Fatalf("%s %s: %v\n%s", method, path, err, ans)
		}
	}
}

// report posts events as an executor would and wants each accepted (an
// accepted event is in the log: it survives the kill).
func (s *apolloServer) report(token string, evs ...string) {
	s.t.Helper()
	var ans struct {
		Results []struct {
			Result string `json:"result"`
		} `json:"results"`
	}
	s.call("POST", "/api/v1/events", token, "["+strings.Join(evs, ",")+"]", &ans)
	for i, r := range ans.Results {
		if r.Result != "accepted" {
			s.t.Fatalf("event %s: %s", evs[i], r.Result)
		}
	}
}

// holdBack makes every page the browser opens from now on count the
// stream messages it handles by type (window.__got), drop those whose
// type is in window.__held, and never run an interval of 5 s or more.
// The figures of the System and Jobs pages then change only when the
// page reads them itself, not when the server's next periodic message or
// the page's next periodic read comes: what a user sees in the seconds
// before those, made to last.
func (b *browser) holdBack() {
	b.t.Helper()
	const script = `(() => {
  window.__got = {};
  window.__held = new Set();
  const set = Object.getOwnPropertyDescriptor(WebSocket.prototype, "onmessage").set;
  Object.defineProperty(WebSocket.prototype, "onmessage", { configurable: true, set(fn) {
    set.call(this, (e) => {
      let type = "";
      try { type = JSON.parse(e.data).type; } catch {}
      if (window.__held.has(type)) return;
      fn(e);
      window.__got[type] = (window.__got[type] || 0) + 1;
    });
  } });
  const every = window.setInterval;
  window.setInterval = (fn, ms, ...a) => (ms >= 5000 ? 0 : every(fn, ms, ...a));
})();`
	if _, err := chromedp.Call(b.ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: script}); err != nil {
		b.t.Fatal(err)
	}
}

// otherProfile opens a tab in a new browser context of b's browser: its
// own storage, so another token.
func (b *browser) otherProfile() *browser {
	b.t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatal(err)
	}
	return &browser{t: b.t, ctx: ctx, shot: b.shot, errs: make(chan string, 1)}
}

// fact is the value the System page shows for a figure of a component.
func fact(component, label string) string {
	return fmt.Sprintf(`([...document.querySelectorAll("#sys-%s dt")].find((e) => e.textContent === %q)?.nextElementSibling?.textContent ?? "")`, component, label)
}

// cell is the text of one column of a job's row on the Jobs page.
func cell(job, label string) string {
	return fmt.Sprintf(`(document.querySelector('tr[data-job=%q] td[data-label=%q]')?.textContent ?? "")`, job, label)
}

// After the server restarted, the System and Jobs pages went on showing
// the figures of the process that was killed, under the Live indicator,
// until the new process's next periodic message (5 s for the system, 10 s
// for the metrics): the last message of the old stream was kept and
// preferred to what the page read itself. Now, connected again, each
// page reads its figures at once. The server's messages and the page's
// own periodic reads are held back here (holdBack), so only the
// reconnection can bring the new figures: a real kill -9 and start on the
// same data and address, a tenant on each page, each seeing only its own.
func TestFiguresAfterARestartInBrowser(t *testing.T) {
	bin := buildApollo(t)
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("auth:\n  tokens:\n")
	secrets := map[string]string{}
	for _, tenant := range []string{"acme", "beta"} {
		secret, tok, err := httpapi.NewToken(tenant+"-viewer", httpapi.RoleViewer, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant] = secret
		fmt.Fprintf(&cfg, "    - {name: %s-viewer, role: viewer, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	// The events are reported with an agent token of each tenant.
	for _, tenant := range []string{"acme", "beta"} {
		secret, tok, err := httpapi.NewToken(tenant+"-agent", httpapi.RoleAgent, tenant)
		if err != nil {
			t.Fatal(err)
		}
		secrets[tenant+"-agent"] = secret
		fmt.Fprintf(&cfg, "    - {name: %s-agent, role: agent, tenant: %q, sha256: %x}\n", tenant, tenant, tok.Hash)
	}
	path := filepath.Join(dir, "apollo.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, bin, "127.0.0.1:0", "--config", path, "--data", filepath.Join(dir, "data"))
	// Every run has finished by the time it is reported: the metrics
	// count a run in the 10 s step of its end, and the current window ends
	// with the current step, so a run ending a second ahead was not
	// counted yet one time in ten, and the page, which reads only when the
	// stream comes back here, missed it.
	past := func() time.Time { return time.Now().Add(-2 * time.Second) }
	srv.report(secrets["acme-agent"], run("etl_acme", "etl_acme-1", "success", past(), time.Second)...)
	srv.report(secrets["beta-agent"], run("etl_beta", "etl_beta-1", "success", past(), time.Second)...)

	jobs := newBrowser(t)
	jobs.holdBack()
	jobs.signIn("http://"+srv.addr+"/jobs", secrets["acme"])
	jobs.until("acme's job, one run", cell("etl_acme", "Runs")+` === "1" && !document.querySelector('tr[data-job="etl_beta"]')`)
	system := jobs.otherProfile()
	system.holdBack()
	system.signIn("http://"+srv.addr+"/system", secrets["beta"])
	system.until("the recovery at start, from an empty log", fact("recovery", "records replayed")+` === "0"`)
	// Each page has shown a message of the stream before it is held back:
	// the old code kept it, and preferred it, after the restart.
	jobs.until("a metric message", `window.__got.metric >= 1`)
	jobs.do("hold back the metric messages", chromedp.Evaluate[chromedp.Void](`window.__held.add("metric")`))
	system.until("a system message", `window.__got.system >= 1`)
	system.do("hold back the system messages", chromedp.Evaluate[chromedp.Void](`window.__held.add("system")`))

	srv.report(secrets["acme-agent"], run("etl_acme", "etl_acme-2", "failed", past(), time.Second)...)
	srv.report(secrets["beta-agent"], run("etl_beta", "etl_beta-2", "failed", past(), time.Second)...)
	down := time.Now()
	srv = srv.restart()
	t.Logf("the server was back %v after the kill", time.Since(down).Round(time.Millisecond))
	var stats struct {
		Recovery struct {
			Events int `json:"events"`
		} `json:"recovery"`
	}
	srv.call("GET", "/api/v1/system", secrets["beta"], "", &stats)
	if stats.Recovery.Events == 0 {
		t.Fatal("the restarted server replayed no record: it was not killed after the events were written")
	}

	// Each page tries again 0.5 s after the close, then twice as long
	// each time up to 30 s, ±25 %: a server that took seconds to come back
	// on a loaded machine is found up to 37.5 s after it is up.
	live := `document.querySelector("#conn")?.dataset.state === "open"`
	jobs.untilIn("connected again", live, 40*time.Second)
	system.untilIn("connected again", live, 40*time.Second)
	jobs.until("acme's job as the restarted server counts it, and nothing of beta's",
		live+` && `+cell("etl_acme", "Runs")+` === "2" && `+cell("etl_acme", "Failed")+` === "1" && !document.querySelector('tr[data-job="etl_beta"]')`)
	jobs.screenshot("jobs-after-restart")
	system.until("the restarted process's recovery", live+` && `+fact("recovery", "records replayed")+fmt.Sprintf(` === "%d"`, stats.Recovery.Events))
	system.screenshot("system-after-restart")
}
