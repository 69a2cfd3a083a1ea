//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apollo-11/apollo/config"
	"github.com/apollo-11/apollo/httpapi"
)

func TestLeaseSpool(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	a, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	b, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if a.dir == b.dir {
		t.Fatalf("two processes share %s", a.dir)
	}
	// b leaves events behind and ends; a still runs. The next process
	// takes an empty slot for its own events, so that its client carries
	// only them, and sends b's through another; a's slot stays a's.
	os.MkdirAll(b.dir, 0o700)
	os.WriteFile(filepath.Join(b.dir, "0000000000000001-0000.ndjson"), []byte("{}\n"), 0o600)
	b.release()
	c, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if c.dir == a.dir || c.dir == b.dir || c.inherited || len(c.orphans) != 1 || c.orphans[0] != b.dir {
		t.Errorf("got slot %s (inherited %v) and orphans %v, want a third, empty one and [%s]", c.dir, c.inherited, c.orphans, b.dir)
	}
	// Once a has ended too, the next process takes the first slot, and
	// sends what b left in the other, free one.
	c.release()
	a.release()
	d, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if d.dir != a.dir || d.inherited || len(d.orphans) != 1 || d.orphans[0] != b.dir {
		t.Errorf("got slot %s (inherited %v) and orphans %v, want %s and [%s]", d.dir, d.inherited, d.orphans, a.dir, b.dir)
	}
	d.release()

	// Every free slot holds files: the first is the run's own, inherited,
	// and the others are orphans.
	root = t.TempDir()
	for i := range spoolSlots {
		dir := filepath.Join(root, fmt.Sprintf("slot-%02d", i))
		os.MkdirAll(dir, 0o700)
		os.WriteFile(filepath.Join(dir, "0000000000000001-0000.ndjson"), []byte("{}\n"), 0o600)
	}
	e, err := leaseSpool(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(root, "slot-00"); e.dir != want || !e.inherited || len(e.orphans) != spoolSlots-1 {
		t.Errorf("got slot %s (inherited %v) and %d orphans, want %s inherited and %d", e.dir, e.inherited, len(e.orphans), want, spoolSlots-1)
	}
	e.release()

	// Every slot busy: no spool, said plainly.
	root = t.TempDir()
	var all []*spoolLease
	for range spoolSlots {
		l, err := leaseSpool(root)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l)
	}
	if _, err := leaseSpool(root); err == nil {
		t.Errorf("process %d got a slot", spoolSlots+1)
	}
	for _, l := range all {
		l.release()
	}
}

// TestExecSaysWhatAnotherTokenLeftInTheSpool: events apollo exec spooled
// under one token (tenant a's, or a token since rotated) are sent only by
// a run with that token; a run with another token must say they wait and
// what to do, not leave them there unseen for ever, and must not send them.
func TestExecSaysWhatAnotherTokenLeftInTheSpool(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	addr, _, _ := inProcess(t, cfg)
	root := t.TempDir()
	execAs := func(server string, tn sdkTenant, task string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"exec", "--server", server, "--token", tn.agent, "--spool", root,
			"--name", "job", "--task", task, "--", "true"}, strings.NewReader(""), &out, &errb)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", task, code, errb.String())
		}
		return errb.String()
	}
	// Tenant a's run cannot reach the server: its events wait in a's part
	// of the spool.
	execAs("http://127.0.0.1:1", tenants[0], "a-1")
	aDir := filepath.Join(root, spoolPartition(tenants[0].agent))
	if !hasSpoolFiles(aDir) {
		t.Fatalf("nothing spooled in %s", aDir)
	}
	errOut := execAs("http://"+addr, tenants[1], "b-1")
	if !strings.Contains(errOut, "reported with another token wait in "+aDir) || !strings.Contains(errOut, "apollo spool send --from "+filepath.Base(aDir)) {
		t.Errorf("tenant b's run did not say what waits in %s:\n%s", aDir, errOut)
	}
	if _, ok := sdkTasks(t, addr, tenants[1])["a-1"]; ok {
		t.Fatal("tenant a's run was sent into tenant b")
	}
	execAs("http://"+addr, tenants[0], "a-2")
	if _, ok := sdkTasks(t, addr, tenants[0])["a-1"]; !ok {
		t.Fatal("tenant a's next run did not send a-1")
	}
	if errOut := execAs("http://"+addr, tenants[1], "b-2"); errOut != "" {
		t.Errorf("nothing waits any more, yet:\n%s", errOut)
	}
}

// hasSpoolFiles reports whether any slot under a token's directory holds
// a spool file.
func hasSpoolFiles(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "slot-*", "*.ndjson"))
	return len(files) > 0
}

// TestSpoolListAndSend drives apollo spool as an operator would after an
// outage: list what apollo exec left per token, send your own part now,
// and hand the part of a token since rotated to its successor of the same
// tenant. Two tenants: nothing crosses between them.
func TestSpoolListAndSend(t *testing.T) {
	cleanEnv(t)
	cfg := testConfig(t)
	tenants := sdkTenants(t, &cfg, 0, "a", "b")
	a, b := tenants[0], tenants[1]
	// b's token is rotated: the successor, of tenant b too.
	r, _ := httpapi.ParseRole("agent")
	successor, tok, err := httpapi.NewToken("agent2", r, "b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, config.Token{Name: "agent2", Role: "agent", Tenant: "b", SHA256: fmt.Sprintf("%x", tok.Hash)})
	addr, _, _ := inProcess(t, cfg)
	root := t.TempDir()
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	// Both tenants' runs meet a server that is down.
	for _, r := range []struct{ tn sdkTenant }{{a}, {b}} {
		if code, _, errOut := cli("exec", "--server", "http://127.0.0.1:1", "--token", r.tn.agent, "--spool", root,
			"--name", "job", "--task", r.tn.name+"-1", "--", "true"); code != 0 {
			t.Fatalf("exec as %s: exit %d: %s", r.tn.name, code, errOut)
		}
	}
	bPart := spoolPartition(b.agent)
	list := func(token string) []spoolPart {
		t.Helper()
		code, out, errOut := cli("spool", "list", "--spool", root, "--token", token, "-o", "json")
		if code != 0 {
			t.Fatalf("spool list: exit %d: %s", code, errOut)
		}
		var parts []spoolPart
		if err := json.Unmarshal([]byte(out), &parts); err != nil {
			t.Fatalf("spool list -o json: %v\n%s", err, out)
		}
		return parts
	}
	parts := list(a.agent)
	if len(parts) != 2 || !parts[0].Yours || parts[0].Name != spoolPartition(a.agent) || parts[1].Name != bPart || parts[1].Yours ||
		parts[0].Events != 3 || parts[1].Events != 3 || parts[0].Sending != 0 {
		t.Fatalf("spool list as a: %+v, want a's part (yours) and b's, 3 events each (pending, running, success)", parts)
	}

	// A slot a running apollo exec holds is left to it, and listed so.
	held, free, err := tryLock(filepath.Join(root, bPart, "slot-00.lock"))
	if err != nil || !free {
		t.Fatalf("locking b's slot: %v", err)
	}
	if p := partNamed(list(successor), bPart); p.Sending != 1 || p.Events != 3 {
		t.Fatalf("spool list with b's slot held: %+v", p)
	}
	if code, out, errOut := cli("spool", "send", "--spool", root, "--server", "http://"+addr, "--token", successor, "--from", bPart); code != 0 ||
		!strings.Contains(out, "held by a running apollo exec") {
		t.Fatalf("send of a held part: exit %d: %s%s", code, out, errOut)
	}
	held.Close()

	// a sends its own part now; b's stays where it is.
	code, out, errOut := cli("spool", "send", "--spool", root, "--server", "http://"+addr, "--token", a.agent)
	if code != 0 || !strings.Contains(out, "sent 3 events") {
		t.Fatalf("spool send as a: exit %d: %s%s", code, out, errOut)
	}
	if _, ok := sdkTasks(t, addr, a)["a-1"]; !ok {
		t.Fatal("a-1 is not on the server after spool send said sent")
	}
	if p := list(a.agent); len(p) != 1 || p[0].Name != bPart || p[0].Events != 3 {
		t.Fatalf("after a's send: %+v, want only b's part, untouched", p)
	}

	// The server down: b's part stays, and the exit code says so.
	code, _, errOut = cli("spool", "send", "--spool", root, "--server", "http://127.0.0.1:1", "--token", successor, "--from", bPart, "--wait", "300ms")
	if code != exitServer || !strings.Contains(errOut, "left in") {
		t.Fatalf("spool send to a server down: exit %d: %s", code, errOut)
	}
	if p := partNamed(list(successor), bPart); p.Events != 3 {
		t.Fatalf("after a failed send: %+v, want b's 3 events kept", p)
	}

	// b's successor token sends the rotated token's part into tenant b.
	code, out, errOut = cli("spool", "send", "--spool", root, "--server", "http://"+addr, "--token", successor, "--from", bPart)
	if code != 0 || !strings.Contains(out, "sent 3 events") {
		t.Fatalf("spool send --from: exit %d: %s%s", code, out, errOut)
	}
	if _, ok := sdkTasks(t, addr, b)["b-1"]; !ok {
		t.Fatal("b-1 is not in tenant b after spool send --from")
	}
	if _, ok := sdkTasks(t, addr, a)["b-1"]; ok {
		t.Fatal("b-1 reached tenant a")
	}
	if code, out, _ := cli("spool", "list", "--spool", root, "--token", a.agent); code != 0 || !strings.Contains(out, "nothing waits") {
		t.Fatalf("spool list after both sends: exit %d: %s", code, out)
	}
	if code, _, errOut := cli("spool", "send", "--spool", root, "--token", a.agent, "--from", "token-nope"); code != exitUsage ||
		!strings.Contains(errOut, "apollo spool list") {
		t.Fatalf("--from an unknown part: exit %d: %s", code, errOut)
	}
}

// partNamed is the part of the spool named name in parts, or none.
func partNamed(parts []spoolPart, name string) spoolPart {
	for _, p := range parts {
		if p.Name == name {
			return p
		}
	}
	return spoolPart{}
}
