//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/apollo-11/apollo"
	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
	"github.com/apollo-11/apollo/internal/testwait"
)

// TestScripts runs the CLI end to end: each testdata/script/*.txtar gets
// its own in-process server (configured by the script's apollo.yaml, if it
// has one) and runs the real binary against it. Extra commands:
//
//	apollo ARGS...   run the binary; "! apollo" expects a non-zero exit
//	exitcode N       the last apollo exited with N
//	settle           wait until the server has applied every accepted
//	                 event to its metrics (no sleeping: see settleClock)
//
// Variables: APOLLO_SERVER, SERVER_ALIAS (the same server as
// http://localhost:PORT), DEAD_SERVER (nothing listens there), EVIL (what
// a terminal acts on: ESC ] title BEL, ESC [2J, ESC [31m, C1 CSI, a bidi
// override, DEL), MOVED (a web server that answers a POST with a redirect
// to its sign-in page, which answers a GET with 200, as an endpoint behind
// a single sign-on proxy does), ECHO (a web server whose answers quote the
// request's Authorization header and path and query: a 401 with JSON, or,
// at /robot/send, a 200 with an HTML page).
//
// Conditions: [alert] this build's server has the alert routes; [redis]
// APOLLO_TEST_REDIS names a Redis, which scripts find in $REDIS.
func TestScripts(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The test binary behaves as apollo with APOLLO_TEST_MAIN=1 (TestMain).
	wrapper := fmt.Sprintf("#!/bin/sh\nAPOLLO_TEST_MAIN=1 exec %s \"$@\"\n", strconv.Quote(exe))
	if err := os.WriteFile(filepath.Join(bin, "apollo"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	dead := freeAddr(t) // closed again: nothing listens there
	moved := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			http.Redirect(w, r, "/sign-in?next="+r.URL.Path, http.StatusFound)
			return
		}
		fmt.Fprint(w, "<html>Sign in to continue</html>")
	}))
	t.Cleanup(moved.Close)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robot/send" { // a proxy's page before a robot API
			fmt.Fprintf(w, "<html>no route for %s</html>", r.URL.RequestURI())
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"bad credentials %q for %s"}`, r.Header.Get("Authorization"), r.URL.RequestURI())
	}))
	t.Cleanup(echo.Close)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("DEAD_SERVER", "http://"+dead)
			env.Setenv("MOVED", moved.URL)
			env.Setenv("ECHO", echo.URL)
			env.Setenv("REDIS", os.Getenv("APOLLO_TEST_REDIS"))
			env.Setenv("EVIL", "\x1b]0;pwned\a\x1b[2J\x1b[31m\u009b\u202e\x7f")
			return startScriptServer(env)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"apollo":   cmdApollo,
			"exitcode": cmdExitcode,
			"settle":   cmdSettle,
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "alert":
				return hasAlertRoutes(), nil
			case "redis":
				return os.Getenv("APOLLO_TEST_REDIS") != "", nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}

type scriptKey string

const (
	keyExit  scriptKey = "exit"
	keyClock scriptKey = "clock"
)

// settleEvery is the snapshot period of script servers: odd enough that
// only their checkpoint loop asks settleClock for such a ticker.
const settleEvery = 97*time.Hour + 13*time.Second

// settleClock is the system clock, except that the server's checkpoint
// ticker is a channel the test sends on. The channel is unbuffered: the
// second of two sends returns only once the loop came back for more, so
// the first checkpoint, which waits until every accepted event reached
// the metrics, is over.
type settleClock struct {
	apollo.Clock
	tick chan time.Time
}

func (c *settleClock) NewTicker(d time.Duration) apollo.Ticker {
	if d == settleEvery {
		return settleTicker{c.tick}
	}
	return c.Clock.NewTicker(d)
}

// startScriptServer runs a server for one script and points APOLLO_SERVER
// at it. The server log is $WORK/server.log.
func startScriptServer(env *testscript.Env) error {
	cfg := config.Default()
	if path := filepath.Join(env.WorkDir, "apollo.yaml"); fileExists(path) {
		var err error
		if cfg, err = config.Load(path, env.Getenv); err != nil {
			return err
		}
	}
	cfg.Data = filepath.Join(env.WorkDir, ".data")
	cfg.Listen = "127.0.0.1:0"
	cfg.SnapshotEvery = config.Duration(settleEvery)
	if cfg.Jobs != "" && !filepath.IsAbs(cfg.Jobs) {
		cfg.Jobs = filepath.Join(env.WorkDir, cfg.Jobs)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(env.WorkDir, "server.log"))
	if err != nil {
		return err
	}
	clk := &settleClock{Clock: apollo.SystemClock, tick: make(chan time.Time)}
	ctx, cancel := context.WithCancel(context.Background())
	up, done := make(chan string, 1), make(chan error, 1)
	go func() {
		done <- runServer(ctx, cfg, serverDeps{log: slog.New(slog.NewTextHandler(logf, nil)), clock: clk,
			ready: func(a string) { up <- a }})
	}()
	env.Defer(func() {
		cancel()
		<-done
		logf.Close()
	})
	select {
	case addr := <-up:
		env.Setenv("APOLLO_SERVER", "http://"+addr)
		// The same server under another name, which the CLI takes for
		// another server.
		_, port, _ := net.SplitHostPort(addr)
		env.Setenv("SERVER_ALIAS", "http://localhost:"+port)
	case err := <-done:
		return fmt.Errorf("server did not start: %w", err)
	case <-time.After(testwait.Generous()):
		return errors.New("server not up")
	}
	env.Setenv("TZ", "UTC")
	env.Setenv("XDG_CACHE_HOME", filepath.Join(env.WorkDir, ".cache"))
	env.Setenv("XDG_CONFIG_HOME", filepath.Join(env.WorkDir, ".config"))
	env.Values[keyExit] = new(int)
	env.Values[keyClock] = clk
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func cmdApollo(ts *testscript.TestScript, neg bool, args []string) {
	err := ts.Exec("apollo", args...)
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("apollo %q: %v", args, err)
		}
		code = ee.ExitCode()
	}
	*ts.Value(keyExit).(*int) = code
	switch {
	case neg && code == 0:
		ts.Fatalf("apollo %q succeeded, want a failure", args)
	case !neg && code != 0:
		ts.Fatalf("apollo %q: exit %d", args, code)
	}
}

func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: exitcode N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	if got := *ts.Value(keyExit).(*int); got != want {
		ts.Fatalf("the last apollo exited %d, want %d", got, want)
	}
}

func cmdSettle(ts *testscript.TestScript, neg bool, args []string) {
	clk := ts.Value(keyClock).(*settleClock)
	for range 2 {
		select {
		case clk.tick <- time.Now():
		case <-time.After(testwait.Generous()):
			ts.Fatalf("the server's checkpoint loop did not take a tick")
		}
	}
}

// hasAlertRoutes reports whether this build's API has the alert routes:
// with an authenticator that refuses everyone, a route that exists answers
// 401 before any handler runs; one that does not answers 404.
func hasAlertRoutes() bool {
	api := httpapi.New(httpapi.Options{Auth: refuseAll{}})
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/alerts", nil))
	return rec.Code == http.StatusUnauthorized
}

type refuseAll struct{}

func (refuseAll) Authenticate(*http.Request) (*httpapi.Principal, error) {
	return nil, &apollo.Error{Code: apollo.EUNAUTHORIZED, Message: "probe"}
}
