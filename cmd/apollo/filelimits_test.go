//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apollo-11/apollo/apiclient"
	"github.com/apollo-11/apollo/internal/sourcefile"
)

// A file the server reloads (SIGHUP, or the poll of the rules and
// expectations files) that grew past its limit, 16 MiB, is refused with a
// line that names the file and the limit, and what ran goes on: the jobs,
// the default tenant's rules and expectations from their files, and
// another tenant's, set through the API. Before, each file was read
// whole, however large, and put in force. (TestScripts/filelimits shows
// /dev/zero, a FIFO and a directory refused at start.)
func TestAFileOverItsLimitIsRefusedAtReload(t *testing.T) {
	if testing.Short() {
		t.Skip("writes three files of 16 MiB")
	}
	t.Parallel()
	x := newExpectServer(t)
	jobs := filepath.Join(x.dir, "jobs.yaml")
	if err := os.WriteFile(jobs, []byte("jobs:\n  - {name: kept_job, schedule: \"@yearly\", command: [\"true\"]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.OpenFile(x.cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(cfg, "jobs: %s\n", jobs)
	cfg.Close()
	srv := x.start(t)
	ctx := testCtx(t, 2*time.Minute)
	def, acme := x.client(t, srv, ""), x.client(t, srv, "acme")
	if _, err := acme.PutRules(ctx, []byte("RULE acme_rule task_prefix: \"acme_\" ON: failed NOTIFY: hook\n"), apiclient.RulesText); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.PutExpectations(ctx, []byte("expectations:\n  - job: acme_job\n    every: 1h\n")); err != nil {
		t.Fatal(err)
	}
	// What runs, as the API shows it to each tenant.
	state := func() string {
		var b strings.Builder
		for _, c := range []*apiclient.Client{def, acme} {
			rs, err := c.Rules(ctx)
			if err != nil {
				t.Fatal(err)
			}
			es, err := c.Expectations(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "rules %d %q; expectations %d %q\n", len(rs.Rules), rs.Source, es.Count, es.Source)
		}
		js, err := def.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range js {
			fmt.Fprintf(&b, "job %s\n", j.Name)
		}
		return b.String()
	}
	before := state()
	if !strings.Contains(before, "job kept_job") || !strings.Contains(before, "acme_rule") || !strings.Contains(before, "acme_job") {
		t.Fatalf("the server does not run what it was given:\n%s", before)
	}

	// Good files, but one byte over the limit, with a comment.
	grown := map[string]struct{ src, what string }{
		jobs:                                {"jobs:\n  - {name: new_job, schedule: \"@yearly\", command: [\"true\"]}\n", "a jobs file"},
		filepath.Join(x.dir, "rules.txt"):   {"RULE new_rule task_prefix: \"new_\" ON: failed NOTIFY: hook\n", "a rules file"},
		filepath.Join(x.dir, "expect.yaml"): {"expectations:\n  - job: new_job\n    every: 1h\n", "an expectations file"},
	}
	for path, f := range grown {
		pad := sourcefile.MaxSize + 1 - len(f.src) - 1
		src := append(append([]byte(f.src), bytes.Repeat([]byte("#"), pad)...), '\n')
		if err := os.WriteFile(path, src, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for path, f := range grown {
		want := path + ": larger than 16 MiB, the most " + f.what + " may be"
		eventually(t, time.Minute, "the log says "+want, func() bool { return strings.Contains(srv.out.String(), want) })
	}
	if after := state(); after != before {
		t.Errorf("after the reload of files over the limit, the server runs\n%s\nwant what it ran before\n%s", after, before)
	}
}
