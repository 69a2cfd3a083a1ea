//go:build unix

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestExecKeepsEventsSentToAWrongAddress: apollo exec pointed at the
// real server under a path it does not serve (a proxy's prefix written
// into --server, the prefix not routed yet) must keep the run's events in
// its spool, as it does for a 404, and the next run with the right
// address sends them, each tenant's into its own. The server answers such
// a POST 405 (its dashboard answers every other path, to GET only), which
// the agent took for a refusal of the events: they were dropped. apollo
// report, which has no spool, must say to check the address.
func TestExecKeepsEventsSentToAWrongAddress(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	root := t.TempDir()
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	wrong := "http://" + addr + "/apollo"
	for _, tn := range tenants {
		code, _, errOut := cli("exec", "--server", wrong, "--token", tn.agent, "--spool", root,
			"--name", "job", "--task", tn.name+"-1", "--", "true")
		if code != 0 {
			t.Fatalf("exec as %s: exit %d: %s", tn.name, code, errOut)
		}
		if dir := filepath.Join(root, spoolPartition(tn.agent)); !hasSpoolFiles(dir) {
			t.Fatalf("exec as %s to %s: nothing kept in %s; stderr:\n%s", tn.name, wrong, dir, errOut)
		}
		if !strings.Contains(errOut, "no events route at this address") {
			t.Errorf("exec as %s to %s did not say why: %s", tn.name, wrong, errOut)
		}
	}
	for _, tn := range tenants {
		if code, _, errOut := cli("exec", "--server", "http://"+addr, "--token", tn.agent, "--spool", root,
			"--name", "job", "--task", tn.name+"-2", "--", "true"); code != 0 {
			t.Fatalf("exec as %s: exit %d: %s", tn.name, code, errOut)
		}
	}
	for i, tn := range tenants {
		tasks := sdkTasks(t, addr, tn)
		for _, id := range []string{tn.name + "-1", tn.name + "-2"} {
			if _, ok := tasks[id]; !ok {
				t.Errorf("%s is not in tenant %s: %v", id, tn.name, tasks)
			}
		}
		other := tenants[1-i]
		if _, ok := sdkTasks(t, addr, other)[tn.name+"-1"]; ok {
			t.Errorf("%s-1 reached tenant %s", tn.name, other.name)
		}
	}

	code, _, errOut := cli("report", "--server", wrong, "--token", tenants[0].agent, "--task", "r-1", "--status", "running")
	if code == 0 || !strings.Contains(errOut, "check the server address") {
		t.Errorf("report to %s: exit %d: %s", wrong, code, errOut)
	}
}

// TestReportSaysTheTokenHoldsALineEnd: a token read from a file with
// Windows line ends ($(cat token) keeps the "\r") cannot go in a header.
// apollo report retried for 8 s and said "is the server running?"; it
// must say at once that the token is wrong, and apollo exec must still
// run the job and say the same.
func TestReportSaysTheTokenHoldsALineEnd(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	bad := tenants[0].agent + "\r"
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"report", "--server", "http://" + addr, "--token", bad, "--task", "crlf-1", "--status", "running"},
		strings.NewReader(""), &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "control character") || strings.Contains(errb.String(), "server running") {
		t.Errorf("report with a token ending in \\r: exit %d: %s", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	code = run(context.Background(), []string{"exec", "--server", "http://" + addr, "--token", bad, "--spool", "",
		"--name", "job", "--task", "crlf-2", "--", "echo", "ran"}, strings.NewReader(""), &out, &errb)
	if code != 0 || out.String() != "ran\n" || !strings.Contains(errb.String(), "control character") {
		t.Errorf("exec with a token ending in \\r: exit %d, stdout %q: %s", code, out.String(), errb.String())
	}
	for _, tn := range tenants {
		if tasks := sdkTasks(t, addr, tn); len(tasks) != 0 {
			t.Errorf("tenant %s has tasks: %v", tn.name, tasks)
		}
	}
}
